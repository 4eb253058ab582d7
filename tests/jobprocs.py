"""Where a running job is: the tests that kill a job wait for its Python tasks, not for a fixed
time that a faster job could outlast."""
import psutil


def python_workers(pid: int) -> list[psutil.Process]:
    """The job's Python worker daemon among the descendants of ``pid`` (the CLI, the task or
    spark-submit), once its first Python tasks have started it."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for k in kids:
        try:
            cmd = k.cmdline()
        except psutil.Error:
            continue
        # ``python -m ...entrypoints.daemon``; spark-submit and the JVM only name it in a --conf
        if "-m" in cmd[:-1] and cmd[cmd.index("-m") + 1].endswith(".entrypoints.daemon"):
            out.append(k)
    return out
