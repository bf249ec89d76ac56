"""The OpInfo sweep's expected failures, per backend: ``op name -> (parts, reason)``.

``parts`` says what fails (``"forward"``: the compiled call raises; ``"backward"``: its
gradient raises); the reason names the root cause and, where the fix belongs to another part
of the compiler, where. The list only shrinks: ``tests/test_opinfo_sweep.py`` fails for an op
on it that now passes (strict, like ``xfail(strict=True)``) and for an op not on it that
fails. A silently wrong answer is never listed: it fails the sweep outright.
"""

_HISTOGRAMDD = ("histogramdd returns a named tuple holding a list of tensors; extern nodes "
                "take a tensor or a flat tuple of tensors")

EXPECTED_FAILURES: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "aot_eager": {
        "histogramdd": (("forward",), _HISTOGRAMDD),
    },
    "inductor": {
        "histogramdd": (("forward",), _HISTOGRAMDD),
    },
}


# The ops that compile to generated kernels under the inductor (the sweep's "generated
# kernels" count, 404 of them): strict like the failures above, the other way round --
# an op on this list that stops producing a kernel (it fell back to a PyTorch call) fails its
# test, so the count only goes up. Add an op when a decomposition or lowering gives it one.
KERNEL_OPS = frozenset({
    "__getitem__", "__radd__", "__rdiv__", "__rmod__", "__rmul__", "__rpow__", "__rsub__",
    "_batch_norm_with_update", "_chunk_cat", "_native_batch_norm_legit",
    "_segment_reduce.lengths", "_segment_reduce.offsets", "_softmax_backward_data",
    "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate", "abs", "acos", "acosh",
    "add", "addbmm", "addcdiv", "addcmul", "addmm", "addmm.decomposed", "addmv", "addr",
    "all", "amax", "amin", "aminmax", "angle", "any", "argmax", "argmin", "argsort", "asin",
    "asinh", "atan", "atan2", "atanh", "baddbmm", "block_diag", "bool", "bucketize", "byte",
    "cartesian_prod", "cat", "cdist", "ceil", "char", "clamp", "clamp_max", "clamp_min",
    "column_stack", "constant_pad_nd", "copysign", "cos", "cosh", "count_nonzero", "cross",
    "cummax", "cummin", "cumprod", "cumsum", "cumulative_trapezoid", "deg2rad", "diag",
    "diag_embed", "diagflat", "diagonal_scatter", "digamma", "dist", "div.floor_rounding",
    "div.no_rounding_mode", "div.trunc_rounding", "dot", "double", "dstack", "einsum",
    "empty_like", "eq", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "fill", "flip",
    "fliplr", "flipud", "float_power", "floor", "floor_divide", "fmax", "fmin", "fmod",
    "frac", "frexp", "full_like", "gather", "ge", "gradient", "grid_sampler_2d",
    "grid_sampler_3d", "gt", "heaviside", "histc", "hstack", "hypot", "i0", "index_add",
    "index_fill", "index_reduce.amax", "index_reduce.amin", "index_reduce.mean",
    "index_reduce.prod", "index_select", "inner", "int", "isclose", "isfinite", "isin",
    "isinf", "isnan", "isneginf", "isposinf", "isreal", "kron", "kthvalue", "ldexp", "le",
    "lerp", "lgamma", "linalg.cross", "linalg.matrix_norm", "linalg.norm",
    "linalg.norm.subgradients_at_zero", "linalg.vander", "linalg.vecdot",
    "linalg.vector_norm", "log", "log10", "log1p", "log2", "log_softmax",
    "log_softmax.with_dtype", "logaddexp", "logaddexp2", "logical_and", "logical_not",
    "logical_or", "logical_xor", "logit", "logsumexp", "long", "lt", "masked.amax",
    "masked.amin", "masked.argmax", "masked.argmin", "masked.cumprod", "masked.cumsum",
    "masked.log_softmax", "masked.logaddexp", "masked.logsumexp", "masked.mean",
    "masked.median", "masked.norm", "masked.normalize", "masked.prod", "masked.softmax",
    "masked.softmin", "masked.std", "masked.sum", "masked.var", "masked_fill",
    "masked_scatter", "max.binary", "max.reduction_no_dim", "max.reduction_with_dim",
    "max_pool2d_with_indices_backward", "maximum", "mean", "median", "min.binary",
    "min.reduction_no_dim", "min.reduction_with_dim", "minimum", "msort", "mul",
    "mvlgamma.mvlgamma_p_1", "mvlgamma.mvlgamma_p_3", "mvlgamma.mvlgamma_p_5", "nan_to_num",
    "nanmean", "nanmedian", "nanquantile", "nansum", "native_batch_norm",
    "native_dropout_backward", "native_group_norm", "native_layer_norm", "ne", "neg",
    "new_empty", "new_empty_strided", "new_full", "new_ones", "new_zeros", "nextafter",
    "nn.functional.adaptive_avg_pool1d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.adaptive_avg_pool3d", "nn.functional.adaptive_max_pool1d",
    "nn.functional.adaptive_max_pool2d", "nn.functional.adaptive_max_pool3d",
    "nn.functional.avg_pool1d", "nn.functional.avg_pool2d", "nn.functional.avg_pool3d",
    "nn.functional.batch_norm", "nn.functional.bilinear",
    "nn.functional.binary_cross_entropy", "nn.functional.binary_cross_entropy_with_logits",
    "nn.functional.celu", "nn.functional.cosine_embedding_loss",
    "nn.functional.cosine_similarity", "nn.functional.cross_entropy", "nn.functional.elu",
    "nn.functional.embedding", "nn.functional.embedding_bag", "nn.functional.gelu",
    "nn.functional.glu", "nn.functional.grid_sample", "nn.functional.group_norm",
    "nn.functional.hardshrink", "nn.functional.hardsigmoid", "nn.functional.hardswish",
    "nn.functional.hardtanh", "nn.functional.hinge_embedding_loss",
    "nn.functional.huber_loss", "nn.functional.instance_norm",
    "nn.functional.interpolate.area", "nn.functional.interpolate.bicubic",
    "nn.functional.interpolate.bilinear", "nn.functional.interpolate.linear",
    "nn.functional.interpolate.nearest", "nn.functional.interpolate.nearest-exact",
    "nn.functional.interpolate.trilinear", "nn.functional.kl_div", "nn.functional.l1_loss",
    "nn.functional.layer_norm", "nn.functional.leaky_relu", "nn.functional.linear",
    "nn.functional.local_response_norm", "nn.functional.logsigmoid",
    "nn.functional.margin_ranking_loss", "nn.functional.max_pool1d",
    "nn.functional.max_pool2d", "nn.functional.max_pool3d", "nn.functional.max_unpool1d",
    "nn.functional.max_unpool1d.grad", "nn.functional.max_unpool2d",
    "nn.functional.max_unpool2d.grad", "nn.functional.max_unpool3d",
    "nn.functional.max_unpool3d.grad", "nn.functional.mish", "nn.functional.mse_loss",
    "nn.functional.multi_margin_loss", "nn.functional.multilabel_margin_loss",
    "nn.functional.multilabel_soft_margin_loss", "nn.functional.nll_loss",
    "nn.functional.normalize", "nn.functional.pad.circular", "nn.functional.pad.constant",
    "nn.functional.pad.reflect", "nn.functional.pad.replicate",
    "nn.functional.pad.replicate_negative", "nn.functional.pairwise_distance",
    "nn.functional.poisson_nll_loss", "nn.functional.prelu", "nn.functional.relu",
    "nn.functional.relu6", "nn.functional.rms_norm", "nn.functional.selu",
    "nn.functional.silu", "nn.functional.smooth_l1_loss", "nn.functional.soft_margin_loss",
    "nn.functional.softmin", "nn.functional.softmin.with_dtype", "nn.functional.softplus",
    "nn.functional.softshrink", "nn.functional.softsign", "nn.functional.tanhshrink",
    "nn.functional.threshold", "nn.functional.triplet_margin_loss",
    "nn.functional.upsample_bilinear", "nn.functional.upsample_nearest", "norm", "norm.fro",
    "norm.inf", "ones_like", "outer", "polygamma.polygamma_n_0", "polygamma.polygamma_n_1",
    "polygamma.polygamma_n_2", "polygamma.polygamma_n_3", "polygamma.polygamma_n_4", "pow",
    "prod", "put", "quantile", "rad2deg", "reciprocal", "remainder", "renorm", "rot90",
    "round", "round.decimals_0", "round.decimals_3", "round.decimals_neg_3", "rsqrt",
    "rsub", "scatter_add", "scatter_reduce.amax", "scatter_reduce.amin",
    "scatter_reduce.mean", "scatter_reduce.prod", "scatter_reduce.sum", "searchsorted",
    "select_scatter", "sgn", "short", "sigmoid", "sign", "signbit", "sin", "sinc", "sinh",
    "slice_scatter", "softmax", "softmax.with_dtype", "sort", "special.bessel_j0",
    "special.bessel_j1", "special.bessel_y0", "special.bessel_y1",
    "special.chebyshev_polynomial_t", "special.chebyshev_polynomial_u",
    "special.chebyshev_polynomial_v", "special.chebyshev_polynomial_w", "special.entr",
    "special.erfcx", "special.i0e", "special.i1", "special.i1e", "special.log_ndtr",
    "special.modified_bessel_i0", "special.modified_bessel_i1",
    "special.modified_bessel_k0", "special.modified_bessel_k1", "special.ndtr",
    "special.ndtri", "special.polygamma.special_polygamma_n_0",
    "special.scaled_modified_bessel_k0", "special.scaled_modified_bessel_k1",
    "special.spherical_bessel_j0", "special.xlog1py", "sqrt", "square", "stack", "std",
    "std.unbiased", "std_mean", "std_mean.unbiased", "sub", "sum", "sum_to_size", "take",
    "take_along_dim", "tan", "tanh", "to", "topk", "torch.ops.aten._safe_softmax.default",
    "trace", "trapezoid", "trapz", "tril", "triu", "true_divide", "trunc", "unfold",
    "unfold_copy", "var", "var.unbiased", "var_mean", "var_mean.unbiased", "vdot", "vstack",
    "where", "xlogy", "zero_", "zeros_like",
})
