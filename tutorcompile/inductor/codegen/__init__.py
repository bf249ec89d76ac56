"""Kernel writers: ``cpp`` (C++/OpenMP for CPUs) and ``triton`` (GPUs, or the CPU
interpreter), sharing the kernel plan, CSE and ops handler of ``common``."""
