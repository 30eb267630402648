"""Run a function in worker processes, each pinned to one CPU core from its first instruction.

A worker starts a fresh interpreter whose first statement pins it to its core, before JAX is imported: JAX sizes
its thread pool from the cores it may use at import, and a process pinned afterwards hands work between threads
that share one core (measured 25x slower). The parent writes two length-prefixed pickles to the worker's stdin,
(sys.path, its JAX settings that change results or compilation) and (target, job), then one byte to stop it;
the worker sends ("progress", n), ("done", result) or ("error", exception) as pickles on its original stdout
(what it prints goes to stderr).
"""

import os
import pickle
import queue
import subprocess
import sys
import threading

import jax

__all__ = ["usable_cores", "run_pinned", "serve"]

# JAX settings a worker takes from its parent: float64, and the persistent compilation cache
# (bayeskern.enable_compilation_cache), with which a second run loads its programs instead of compiling them
_FORWARDED = ("jax_enable_x64", "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
              "jax_persistent_cache_min_entry_size_bytes")

_BOOT = ("import os, signal\n"
         "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"   # a Ctrl-C reaches a worker as a stop line, between chunks
         "if hasattr(os, 'sched_setaffinity'):\n"
         "    os.sched_setaffinity(0, {{{core}}})\n"
         "from bayeskern._workers import serve\n"
         "serve()\n")


def usable_cores() -> list:
    """The CPU cores this process may run on."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def run_pinned(target, jobs, cores, progress):
    """``target(job, report, stop)`` for each job in a worker process of its own, job i on ``cores[i]``.

    Args:
        target: a function defined at the top level of an importable module; ``report(n)`` moves the progress,
            ``stop`` is a ``threading.Event`` set when the parent asks the worker to stop.
        jobs: picklable arguments, one per worker (at most ``len(cores)``).
        cores: CPU cores.
        progress: called with each reported n.

    Returns:
        (results, interrupted): the targets' return values in job order, and whether a Ctrl-C stopped the workers
        (each target then returned what it had).

    Raises:
        TypeError: for a target or job that does not pickle.
        RuntimeError: when a worker ends without returning; a target's exception is raised as it was.
    """
    header = pickle.dumps((list(sys.path), _settings()))
    try:   # unpickled once the worker has the parent's sys.path (the target's module may live only there)
        payloads = [pickle.dumps((target, job)) for job in jobs]
    except Exception as e:   # pickle raises several types (PicklingError, AttributeError, TypeError)
        raise TypeError(f"the worker processes need the target and its job as pickles: {e}") from e
    messages, workers, results, interrupted = queue.Queue(), [], {}, False
    try:
        for i in range(len(payloads)):   # all start at once: a write below waits for its worker's boot (seconds)
            workers.append(subprocess.Popen([sys.executable, "-c", _BOOT.format(core=cores[i])],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE))
            threading.Thread(target=_read, args=(i, workers[i].stdout, messages), daemon=True).start()
        for worker, payload in zip(workers, payloads):
            worker.stdin.write(_frame(header) + _frame(payload))
            worker.stdin.flush()
        try:
            _collect(workers, messages, results, progress)
        except KeyboardInterrupt:
            interrupted = True
            _stop(workers)
            _collect(workers, messages, results, progress)
    except BaseException:
        _stop(workers)
        raise
    finally:
        for worker in workers:
            try:
                worker.stdin.close()
                worker.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                worker.kill()
    return [results[i] for i in range(len(jobs))], interrupted


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(8, "little") + data


def _read_frame(fd) -> bytes:
    """One length-prefixed frame from a raw file descriptor (no buffered reader: the stop listener reads the same
    descriptor later, and a daemon thread blocked inside a buffered reader aborts the interpreter's shutdown)."""
    def exactly(n):
        chunks = []
        while n:
            chunk = os.read(fd, n)
            if not chunk:
                raise EOFError("the parent process closed the pipe")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    return exactly(int.from_bytes(exactly(8), "little"))


def _settings() -> dict:
    return {name: getattr(jax.config, name) for name in _FORWARDED}


def _read(i, stream, messages):
    """Pass worker i's messages on, then ("ended", None) when its stream closes (and close it here)."""
    with stream:
        try:
            while True:
                messages.put((i, pickle.load(stream)))
        except (EOFError, OSError, pickle.UnpicklingError):
            messages.put((i, ("ended", None)))


def _collect(workers, messages, results, progress):
    while len(results) < len(workers):
        i, (kind, value) = messages.get()
        if kind == "progress":
            progress(value)
        elif kind == "done":
            results[i] = value
        elif kind == "error":
            raise value
        elif i not in results:
            raise RuntimeError(f"worker process {i} ended (exit code {workers[i].wait()}) without returning")


def _stop(workers):
    for worker in workers:
        try:
            worker.stdin.write(b"s")
            worker.stdin.flush()
        except (OSError, ValueError):   # it has ended already, or its stdin is closed
            pass


def serve():
    """A worker's main loop (after the boot lines): read the job, run the target, send the result."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)   # prints of the target go to stderr; stdout carries the messages
    lock, stop = threading.Lock(), threading.Event()

    def send(message):
        with lock:
            pickle.dump(message, out)
            out.flush()

    try:
        path, settings = pickle.loads(_read_frame(0))
        sys.path[:] = path
        jax.config.update("jax_platforms", "cpu")
        for name, value in settings.items():   # float64 before the job's arrays are unpickled
            jax.config.update(name, value)
        target, job = pickle.loads(_read_frame(0))
        threading.Thread(target=lambda: (os.read(0, 1), stop.set()), daemon=True).start()   # a byte or EOF
        send(("done", target(job, lambda n: send(("progress", n)), stop)))
    except BaseException as e:
        try:
            pickle.dumps(e)
        except Exception:
            e = RuntimeError(f"a worker process failed: {e!r}")
        send(("error", e))
