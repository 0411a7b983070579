"""Lazy modules (`nn.LazyLinear`, `nn.LazyConv2d` ...) called directly by a captured call.

Their first call materializes the parameters from the input's shape in a forward pre-hook
(`LazyModuleMixin._infer_parameters`) and turns the module into its non-lazy class. Run
watched, the hook read an `UninitializedParameter` (capture stopped), and the record made
then guarded the lazy class, so the next identical call recorded again. As Dynamo does,
the initialization runs first, unwatched, exactly as eager's pre-hook would run it (same
arguments, same random draws in the same order, before the forward): the monitor then
records the forward of an ordinary module. Lazy modules nested inside the called one still
initialize inside the run (their arguments are known only there): that first call stops.
"""
import torch


def initialize(fn, args, kwargs):
    """Materialize `fn`'s parameters when `fn` is a lazy module that has not run yet."""
    from torch.nn.modules.lazy import LazyModuleMixin
    if isinstance(fn, LazyModuleMixin) and isinstance(fn, torch.nn.Module) and \
            fn.has_uninitialized_params() and \
            getattr(fn, "_initialize_hook", None) is not None and \
            fn._initialize_hook.id in fn._forward_pre_hooks:
        fn._infer_parameters(fn, args, kwargs)
