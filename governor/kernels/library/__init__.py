"""The library kernels, one module each (``KERNEL = KernelDescription(...)``).

Every module here is a kernel: :func:`governor.kernels.description.library` finds them.
"""
