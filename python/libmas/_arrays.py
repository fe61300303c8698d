"""Array types and devices: what libmas needs from NumPy, PyTorch or any
DLPack producer, behind one small interface (a "frame").

A frame knows how to allocate outputs next to the input (np.empty, or
torch.empty on the input's device so CUDA memory comes from PyTorch's caching
allocator and works under graph capture), how to hand an array to the C
module without copying it (a DLPack capsule, or a raw descriptor when NumPy
refuses to export a read-only array), and how to do the little array algebra
the public functions need (lengths from a mask, a path from indices) with the
framework itself, on the device, without a host synchronisation.

Inputs of other DLPack producers are viewed zero-copy as NumPy arrays (host)
or PyTorch tensors (CUDA), and results go back through the producer's own
``from_dlpack`` when it has one.
"""

import sys

import numpy as np

from . import _C

_NP_CODES = {
    np.dtype(np.float32): _C.FLOAT32,
    np.dtype(np.float64): _C.FLOAT64,
    np.dtype(np.float16): _C.FLOAT16,
    np.dtype(np.int32): _C.INT32,
    np.dtype(np.int64): _C.INT64,
    np.dtype(np.uint8): _C.UINT8,
    np.dtype(np.bool_): _C.UINT8,
}

VALUE_CODES = (_C.FLOAT32, _C.FLOAT64, _C.FLOAT16, _C.BFLOAT16)


def _torch():
    """The torch module if it is already imported (libmas never imports it
    just to find out that an array is not a tensor)."""
    return sys.modules.get("torch")


def is_torch_tensor(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def check_layout(layout, fname):
    if layout not in ("bts", "bst"):
        raise ValueError(f"{fname}: layout must be 'bts' or 'bst', got {layout!r}")
    return layout == "bst"


def _numpy_handle(arr):
    """A DLPack capsule of a NumPy array, or, when NumPy will not export it
    (read-only arrays, old NumPy and bool), a zero-copy raw descriptor."""
    try:
        return arr.__dlpack__()
    except (BufferError, TypeError, AttributeError):
        pass
    code = _NP_CODES.get(arr.dtype, -1)
    item = arr.itemsize
    if arr.strides is None or any(s % item for s in arr.strides):
        raise ValueError("array strides are not a multiple of its item size")
    strides = tuple(s // item for s in arr.strides)
    address = arr.__array_interface__["data"][0]
    return (address, code, tuple(arr.shape), strides, _C.DL_CPU, 0, arr)


class NumpyFrame:
    """Host arrays as NumPy arrays."""

    name = "numpy"
    is_cuda = False
    device_index = 0
    uint8 = np.dtype(np.uint8)

    def __init__(self, restore=None):
        self._restore = restore

    # -- conversions -------------------------------------------------------
    @staticmethod
    def code(arr):
        return _NP_CODES.get(arr.dtype, -1)

    @staticmethod
    def handle(arr):
        return None if arr is None else _numpy_handle(arr)

    def native_dtype(self, dtype, default):
        return np.dtype(default if dtype is None else dtype)

    def restore(self, arr):
        """Gives a result back in the caller's array type."""
        return arr if self._restore is None or arr is None else self._restore(arr)

    @staticmethod
    def asarray(x):
        if is_torch_tensor(x):
            return x.detach().cpu().numpy()
        if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
            return np.from_dlpack(x)
        return np.asarray(x)

    # -- allocation --------------------------------------------------------
    @staticmethod
    def empty(shape, dtype):
        return np.empty(shape, dtype=dtype)

    @staticmethod
    def score_dtype(value):
        return np.float64 if value.dtype == np.float64 else np.float32

    # -- algebra -----------------------------------------------------------
    def lengths(self, x, batch, what):
        arr = self.asarray(x)
        _check_lengths_meta(arr.ndim, arr.shape, arr.dtype.kind in "iu", batch, what)
        return np.ascontiguousarray(arr, dtype=np.int64)

    def lengths_from_mask(self, mask, bst):
        m = self.asarray(mask)
        first_frame = m[:, 0, :] if bst else m[:, :, 0]
        first_token = m[:, :, 0] if bst else m[:, 0, :]
        return (np.count_nonzero(first_frame, axis=1).astype(np.int64),
                np.count_nonzero(first_token, axis=1).astype(np.int64))

    @staticmethod
    def path_from_indices(indices, tokens, bst, dtype):
        grid = np.arange(tokens, dtype=np.int32)
        if bst:
            hit = indices[:, :, None] == grid[None, None, :]
        else:
            hit = indices[:, None, :] == grid[None, :, None]
        return hit.astype(dtype)


class TorchFrame:
    """PyTorch tensors, on the CPU or on a CUDA device."""

    name = "torch"
    _codes = None  # torch dtype -> mas_dtype, built on first use

    def __init__(self, value, restore=None):
        torch = sys.modules["torch"]
        self.torch = torch
        device = self.device = value.device
        kind = device.type
        self.is_cuda = kind == "cuda"
        if not self.is_cuda and kind != "cpu":
            raise ValueError(f"libmas supports CPU and CUDA tensors, got {device}")
        self.device_index = device.index if self.is_cuda else 0
        self.uint8 = torch.uint8
        self._restore = restore
        if TorchFrame._codes is None:
            TorchFrame._codes = {
                torch.float32: _C.FLOAT32,
                torch.float64: _C.FLOAT64,
                torch.float16: _C.FLOAT16,
                torch.bfloat16: _C.BFLOAT16,
                torch.int32: _C.INT32,
                torch.int64: _C.INT64,
                torch.uint8: _C.UINT8,
                torch.bool: _C.UINT8,
            }

    def code(self, arr):
        return self._codes.get(arr.dtype, -1)

    def current_stream(self):
        """(torch Stream, raw cudaStream_t as int) current on this device."""
        return current_stream(self.torch, self.device, self.device_index)

    def handle(self, arr):
        # The legacy capsule straight from PyTorch: no stream handshake (we run
        # on the tensor's current stream) and no Python-level overhead.
        return None if arr is None else self.torch.utils.dlpack.to_dlpack(arr)

    def native_dtype(self, dtype, default):
        if dtype is None:
            return default
        if isinstance(dtype, self.torch.dtype):
            return dtype
        if isinstance(dtype, str) and isinstance(getattr(self.torch, dtype, None), self.torch.dtype):
            return getattr(self.torch, dtype)
        try:
            name = _TORCH_FROM_NP.get(np.dtype(dtype).type)
        except TypeError:
            name = None
        if name is None:
            raise TypeError(f"unsupported output dtype {dtype!r}")
        return getattr(self.torch, name)

    def restore(self, arr):
        return arr if self._restore is None or arr is None else self._restore(arr)

    def asarray(self, x, dtype=None):
        torch = self.torch
        if isinstance(x, torch.Tensor):
            return x.detach().to(device=self.device, dtype=dtype, non_blocking=True)
        if not isinstance(x, (np.ndarray, list, tuple)) and hasattr(x, "__dlpack__"):
            return torch.from_dlpack(x).to(device=self.device, dtype=dtype)
        return torch.as_tensor(np.asarray(x), dtype=dtype, device=self.device)

    def empty(self, shape, dtype):
        return self.torch.empty(shape, dtype=dtype, device=self.device)

    def score_dtype(self, value):
        torch = self.torch
        return torch.float64 if value.dtype == torch.float64 else torch.float32

    def lengths(self, x, batch, what):
        torch = self.torch
        if type(x) is torch.Tensor and x.dtype is torch.int64 and x.device == self.device:
            # the common case, checked with as little as possible
            if x.dim() != 1 or x.shape[0] != batch:
                _check_lengths_meta(x.dim(), tuple(x.shape), True, batch, what)
            # int64 never requires grad: no detach (it costs a view a call)
            return x if x.is_contiguous() else x.contiguous()
        if isinstance(x, torch.Tensor):
            integer = not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
            _check_lengths_meta(x.dim(), tuple(x.shape), integer, batch, what)
            check_device(what, x.device, self.device)
            # non_blocking: a copy from pageable host memory is staged at once
            # and orders nothing on the host, so the values are never waited for.
            return x.detach().to(device=self.device, dtype=torch.int64,
                                 non_blocking=True).contiguous()
        arr = NumpyFrame.asarray(x)
        _check_lengths_meta(arr.ndim, arr.shape, arr.dtype.kind in "iu", batch, what)
        return torch.as_tensor(np.ascontiguousarray(arr, dtype=np.int64), device=self.device)

    def lengths_from_mask(self, mask, bst):
        m = self.asarray(mask)
        first_frame = m[:, 0, :] if bst else m[:, :, 0]
        first_token = m[:, :, 0] if bst else m[:, 0, :]
        count = self.torch.count_nonzero
        return count(first_frame, dim=1), count(first_token, dim=1)

    def path_from_indices(self, indices, tokens, bst, dtype):
        grid = self.torch.arange(tokens, dtype=indices.dtype, device=self.device)
        if bst:
            hit = indices[:, :, None] == grid[None, None, :]
        else:
            hit = indices[:, None, :] == grid[None, :, None]
        return hit.to(dtype)


_STREAMS = {}  # (device index, raw stream) -> torch.cuda.Stream


def current_stream(torch, device, index):
    """(torch Stream, raw cudaStream_t as int) current on the CUDA device
    (device and its index). torch.cuda.current_stream() builds a new Python
    object each time, which costs more than the rest of a call; the raw
    pointer is cheap, so Stream objects are cached by it."""
    raw_of = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw_of is None:
        stream = torch.cuda.current_stream(device)
        return stream, stream.cuda_stream
    raw = raw_of(index)
    stream = _STREAMS.get((index, raw))
    if stream is None:
        if len(_STREAMS) > 64:
            _STREAMS.clear()
        stream = _STREAMS[(index, raw)] = torch.cuda.current_stream(device)
    return stream, raw


_TORCH_FROM_NP = {
    np.float32: "float32",
    np.float64: "float64",
    np.float16: "float16",
    np.int32: "int32",
    np.int64: "int64",
    np.int16: "int16",
    np.int8: "int8",
    np.uint8: "uint8",
    np.bool_: "bool",
}


def plain(frame, x):
    """x as the frame's array, cut from autograd (the C library only reads;
    a tensor that does not require grad is cut already: a detach would cost
    a view a call)."""
    if frame.name == "torch" and x.requires_grad:
        return x.detach()
    return x


def lengths_from_mask(frame, mask, bst, fname):
    """(x_len, y_len) int64 [B] of a Glow-TTS mask, on the frame's device,
    without a host synchronisation: the number of non-zero entries of the
    first frame's column and of the first token's row (bts: mask[:, :, 0]
    and mask[:, 0, :]; bst swaps the axes). For a 0/1 prefix mask that is
    Glow-TTS's mask.sum(1)[:, 0] and mask.sum(2)[:, 0]; for any other mask it
    is that count, wherever the non-zero entries are. CUDA calls of
    maximum_path count on the device inside the kernel instead
    (mas_hard_cuda_mask), with the same rule."""
    if frame.name == "torch" and is_torch_tensor(mask):
        check_device(f"{fname}: mask", mask.device, frame.device)
    return frame.lengths_from_mask(mask, bst)


def check_device(what, device, value_device):
    """ValueError when an argument lives on another accelerator than the
    value (as PyTorch ops refuse cuda:0 with cuda:1). Host arguments are
    accepted with any value (copied without a host synchronisation).
    what names the function and the argument ("libmas.align: x_lengths")."""
    if device == value_device or device.type == "cpu" or value_device.type == "cpu":
        return
    raise ValueError(f"{what} is on {device} but value is on {value_device}: expected the "
                     f"value's device or the CPU")


def _check_lengths_meta(ndim, shape, integer, batch, what):
    if ndim != 1 or shape[0] != batch:
        raise ValueError(f"{what} must have shape [{batch}] (one per item), got {list(shape)}")
    if not integer and batch > 0:
        raise TypeError(f"{what} must hold integers")


def _producer_from_dlpack(x):
    """The producer library's from_dlpack, to give results back in its type."""
    module = sys.modules.get(type(x).__module__.split(".")[0])
    convert = getattr(module, "from_dlpack", None)
    if convert is None:
        return None

    def restore(arr):
        try:
            return convert(arr)
        except Exception:  # noqa: BLE001 - fall back to the framework's own array
            return arr

    return restore


def frame_for(value, fname):
    """(frame, value as the frame's array) for any supported input."""
    if isinstance(value, np.ndarray):
        return NumpyFrame(), value
    if is_torch_tensor(value):
        return TorchFrame(value), value
    if not hasattr(value, "__dlpack_device__"):
        raise TypeError(
            f"{fname}: value must be a NumPy array, a PyTorch tensor or a DLPack producer, "
            f"got {type(value).__name__}"
        )
    device_type, _ = value.__dlpack_device__()
    restore = _producer_from_dlpack(value)
    if int(device_type) in (_C.DL_CPU, 3):
        return NumpyFrame(restore), np.from_dlpack(value)
    try:
        import torch
    except ImportError as exc:
        raise TypeError("CUDA arrays other than PyTorch tensors need PyTorch installed") from exc
    # torch.from_dlpack hands the producer our current stream (DLPack protocol),
    # so the producer orders its pending work before ours.
    tensor = torch.from_dlpack(value)
    return TorchFrame(tensor, restore), tensor


def value_code(frame, value, fname):
    """The mas_dtype of value, or TypeError."""
    code = frame.code(value)
    if code not in VALUE_CODES:
        raise TypeError(
            f"{fname}: value must be float32, float64, float16 or bfloat16, got {value.dtype}"
        )
    return code
