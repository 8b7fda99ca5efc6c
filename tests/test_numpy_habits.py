"""Numpy habits in the functional API (issue 23, point 2) and numpy arrays bound in place on
devices that work in host memory (issue 25)."""
from __future__ import annotations

import numpy as np
import pytest
from ext_support import REDUCE, run_or_refused

import gpu_mean as gm
from gpu_mean.frontends import arrays, pool

X = np.arange(48, dtype=np.float32).reshape(6, 8)


@pytest.mark.parametrize("axis", [1, (1,), None, -1, (0, 1)])
def test_axis_is_numpys_name_for_axes(device, axis):
    want = X.mean(axis=axis, keepdims=True)
    np.testing.assert_array_equal(gm.reduce_mean(X, axis=axis, device=device), want)
    np.testing.assert_array_equal(gm.reduce_mean(X, axis=axis, keepdims=False, device=device), X.mean(axis=axis))


def test_axis_and_axes_together_are_an_error(device):
    with pytest.raises(gm.InvalidArgumentError, match="axes=.*axis=.*both"):
        gm.reduce_mean(X, axes=[1], axis=1, device=device)


def test_python_lists_and_array_likes_are_taken_as_numpy_takes_them(device):
    rows = X.tolist()
    f32 = [[np.float32(v) for v in r] for r in rows]         # numpy infers float32 from these
    r = gm.reduce_mean(f32, [1], device=device)
    assert type(r) is np.ndarray and r.dtype == np.float32
    np.testing.assert_array_equal(r, X.mean(1, keepdims=True))

    class Like:                                               # any object with __array__
        def __array__(self, dtype=None, copy=None):
            return X

    m = gm.mean(Like(), Like(), device=device)
    assert type(m) is np.ndarray
    np.testing.assert_array_equal(m, X)
    # numpy infers float64 from Python floats: computed where the device has the FLOAT64 kernel,
    # else refused saying why (tests/ext_support.py)
    r64 = run_or_refused(device, REDUCE, gm.DataType.FLOAT64, lambda: gm.reduce_mean(rows, [1], device=device))
    if r64 is not None:
        assert type(r64) is np.ndarray and r64.dtype == np.float64
        np.testing.assert_array_equal(r64, np.asarray(rows).mean(1, keepdims=True))


def test_masked_arrays_are_refused_naming_numpy_ma_mean(device):
    x = np.ma.masked_array(X, mask=X > 40)
    with pytest.raises(TypeError, match=r"numpy\.ma\.mean"):
        gm.reduce_mean(x, [1], device=device)
    with pytest.raises(TypeError, match=r"numpy\.ma\.mean"):
        gm.mean(x, x, device=device)


def test_functional_names_are_listed():
    assert {"mean", "reduce_mean"} <= set(gm.__all__)
    assert {"mean", "reduce_mean"} <= set(dir(gm))


BIG = (np.arange(512 * 256, dtype=np.float32) % 1000).reshape(512, 256)


def test_numpy_in_place_on_host_memory_devices(device, monkeypatch):
    """On a device that works in host memory, a big numpy input is bound over its own bytes and the
    result is written into the numpy array handed back: no upload, no download, no pooled buffer."""
    bridge = device.backend.arrays
    if bridge.kind != "opencl" or not bridge.host_memory:
        pytest.skip("an OpenCL device that works in host memory")
    if getattr(device.backend, "checked", False):
        pytest.skip("a checked device writes each launch's bounds and reads its status back, by design")
    views = (BIG, BIG.T, BIG[:, 1:])
    for x in views:                     # compiled once per signature (with its temporary buffer)
        gm.reduce_mean(x, [1], device=device)
    gm.mean(BIG, BIG[0], device=device)

    def no_copy(*a, **k):
        raise AssertionError("a host array was copied")
    monkeypatch.setattr(device.backend, "write", no_copy)
    monkeypatch.setattr(device.backend, "read", no_copy)
    monkeypatch.setattr(device, "create_buffer", no_copy)
    for x in views:
        assert arrays.Call([x], device, "t").mode == "host in place"
        r = gm.reduce_mean(x, [1], device=device)
        np.testing.assert_array_equal(r, x.mean(1, dtype=np.float64, keepdims=True).astype(np.float32))
    m = gm.mean(BIG, BIG[0], device=device)
    np.testing.assert_array_equal(m, (BIG + BIG[0]) / 2)


def test_misaligned_host_arrays_are_copied(device, monkeypatch):
    bridge = device.backend.arrays
    if bridge.kind != "opencl" or not bridge.host_memory:
        pytest.skip("an OpenCL device that works in host memory")
    monkeypatch.setattr(bridge, "host_ptr_alignment", 1 << 20)     # as if the device wanted huge alignment
    x = BIG[:, 1:]
    assert arrays.Call([x], device, "t").mode == "host"
    np.testing.assert_array_equal(gm.reduce_mean(x, [1], device=device),
                                  x.mean(1, dtype=np.float64, keepdims=True).astype(np.float32))
    assert pool.device_cache(device).pool.allocations > 0
