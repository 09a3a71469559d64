"""The file locks the test processes share the compiled kernels under (support.exclusive): a nested request in the
holding thread fails at once where flock alone would wait for itself forever; other threads and processes wait
their turn."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

import support


@pytest.fixture
def hang_fails():
    """A request that would wait forever raises TimeoutError after 10 s instead (SIGALRM, the main thread's)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGALRM is delivered to the main thread")

    def timed_out(_signum, _frame):
        raise TimeoutError("the lock request waited for itself")
    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_nested_request_of_the_holding_thread_fails_at_once(tmp_path, hang_fails):
    lock = tmp_path / "k.lock"
    with support.exclusive(lock) as got:
        assert got
        for wait in (True, False):
            with pytest.raises(support.LockReentered, match="held by this thread"):
                with support.exclusive(lock, wait=wait):
                    pass
    with support.exclusive(lock) as again:      # released: the same thread takes it again
        assert again


def test_another_thread_and_another_process_wait_their_turn(tmp_path, hang_fails):
    lock = tmp_path / "k.lock"
    probe = ("import fcntl, sys\nwith open(sys.argv[1], 'w') as f:\n"
             "    try:\n        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    except BlockingIOError:\n"
             "        sys.exit(3)\n")
    seen = []

    def other_thread():
        with support.exclusive(lock, wait=False) as got:
            seen.append(got)
    with support.exclusive(lock):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert subprocess.run([sys.executable, "-c", probe, str(lock)]).returncode == 3
    other_thread()
    assert seen == [False, True]
    assert subprocess.run([sys.executable, "-c", probe, str(lock)]).returncode == 0


def test_a_listing_whose_disassembler_asks_for_the_listing_again_fails_instead_of_hanging(
        tmp_path_factory, tmp_path, monkeypatch, hang_fails):
    """As a sass.disassemble patched to answer from the shared listing would, if kernel_listing called it."""
    monkeypatch.setattr(support, "KERNEL_CACHE", tmp_path)
    monkeypatch.setattr(support, "kernel_cubin", lambda factory, stem: (b"\x7fELF cubin of " + stem.encode(), ""))

    def answers_from_the_listing(data):
        return support.kernel_listing(tmp_path_factory, "fake", answers_from_the_listing)
    with pytest.raises(support.LockReentered):
        support.kernel_listing(tmp_path_factory, "fake", answers_from_the_listing)
    assert support.kernel_listing(tmp_path_factory, "fake", lambda data: f"listing of {data!r}") == (
        "listing of b'\\x7fELF cubin of fake'")
