"""`lab.proc.TreeSampler`, the benches' CPU and memory probe, on real processes: a forked child
shares its parent's pages, which a sum of RSS counts twice and a sum of PSS once."""

from __future__ import annotations

import os
import signal
import time

from lab.proc import TreeSampler, tree_pids


def test_pss_counts_pages_a_forked_child_shares_once() -> None:
    ballast = bytearray(os.urandom(64 * 2**20))  # 64 MB resident, shared with the child after fork
    pid = os.fork()
    if pid == 0:  # the child only sleeps: its 64 MB stay shared (copy on write)
        time.sleep(60)
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while pid not in tree_pids(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.05)
        sampler = TreeSampler(os.getpid(), pss=True)
        sampler.sample()
        shared_twice = sampler.peak_rss - sampler.peak_pss
        # the ballast is in both processes' RSS and counted once in their PSS
        assert shared_twice >= 48 * 2**20, (sampler.peak_rss, sampler.peak_pss)
        assert sampler.peak_pss >= len(ballast)
        assert set(sampler.peak_pss_parts) == set(sampler.peak_parts)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_without_pss_only_rss_is_sampled() -> None:
    sampler = TreeSampler(os.getpid())
    sampler.sample()
    assert sampler.peak_rss > 0 and sampler.peak_pss == 0


def test_free_port_never_hands_out_a_port_twice() -> None:
    """A broker's listeners and its KDC take ports one after another and bind them seconds later:
    a port handed out must not be handed out again meanwhile (the kernel may offer a just-closed
    port to the next bind(0))."""
    from lab.proc import free_port

    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
