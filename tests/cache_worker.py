"""A process that fills the kernel cache beside others (test_kernel_cache): imports nothing but the
cache module, so that a spawned worker starts quickly and runs no device discovery."""
from __future__ import annotations

import os


def fill(root: str, n: int, seed: int, q) -> None:
    """Stores and loads the same few keys as the other workers, counting every load that returned
    something other than an entry's whole payload."""
    os.environ["GPU_MEAN_CACHE_DIR"] = root
    from gpu_mean.backends import diskcache
    c = diskcache.open_cache()
    bad = 0
    for i in range(n):
        k = diskcache.make_key("opencl", f"src {i % 5}", ())
        want = bytes([i % 5]) * (50_000 + 1000 * (i % 5))
        got = c.load(k)
        if got is not None and got != want:
            bad += 1
        c.store(k, want)
    q.put((seed, bad))
