"""The course's JupyterLab: the whole repository in the file browser, solutions read-only.

``./course lab`` serves the repository root, so learners reach ``notebooks/`` (the lessons),
``exercises/`` (theirs to fill in) and ``solutions/``. The solutions stay visible -- notebook
00 sends learners there once they have tried, and they are in every clone anyway, so hiding
them from the file browser would hide nothing -- but they are read-only: a learner who opens
one and starts typing cannot overwrite the reference by accident. JupyterLab marks such a
notebook read-only and offers *Save As* instead (into ``exercises/`` or anywhere else).

File permissions cannot express this: the lab often runs as root in containers, and root may
write any file. So :class:`CourseContentsManager` -- the server's default contents manager
with the ``solutions/`` folder reported unwritable and refused for saving, renaming and
deleting -- is what ``./course lab`` passes as ``--ServerApp.contents_manager_class``.

Mirrors: ``jupyter_server.services.contents.largefilemanager.AsyncLargeFileManager`` (the
default it extends); ``writable`` is the contents API's own field for this.
"""

from __future__ import annotations

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado import web
from traitlets import List, Unicode

READ_ONLY_FOLDERS = ("solutions",)


def is_read_only(path: str) -> bool:
    """Whether an API path (``/``-separated, relative to the lab's root) is read-only."""
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    return bool(parts) and parts[0] in READ_ONLY_FOLDERS


class CourseContentsManager(AsyncLargeFileManager):
    """Files as usual, except that ``solutions/`` can be read but not changed."""

    # the editable install's metadata sits at the repository root: not course material
    hide_globs = List(Unicode(), [*AsyncLargeFileManager.hide_globs.default(),  # type: ignore[misc]
                                  "*.egg-info"],
                      config=True, help="Glob patterns to hide in file and directory listings.")

    def is_writable(self, path: str) -> bool:
        return not is_read_only(path) and super().is_writable(path)

    def _refuse(self, path: str) -> None:
        if is_read_only(path):
            raise web.HTTPError(403, f"{path.strip('/')} is read-only in the course lab: "
                                "use File > Save As... to keep your own copy")

    async def save(self, model, path=""):
        self._refuse(path)
        return await super().save(model, path)

    async def rename_file(self, old_path, new_path):
        self._refuse(old_path)
        self._refuse(new_path)
        return await super().rename_file(old_path, new_path)

    async def delete_file(self, path):
        self._refuse(path)
        return await super().delete_file(path)
