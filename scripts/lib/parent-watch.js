/*
 * Stopping with the parent process. A launcher whose parent is gone without passing a signal on
 * (killed outright, or a shell, as `npm run` starts a script with, killed by a SIGTERM) is
 * adopted by init and would keep running, and its children with it. Its parent pid changes
 * then: checking it every half second notices that the parent is gone. Used by
 * scripts/with-redis.js and the demo launchers.
 */

/**
 * Calls `onGone` once, when this process's parent has exited. The check does not keep the
 * process alive. Returns a function that stops checking.
 */
function onParentExit(onGone, everyMs = 500) {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * A terminal or pipe that closed must not end this process halfway through stopping its
 * children: write errors on stdout and stderr (EPIPE once the reader is gone) are ignored.
 */
function ignoreOutputErrors() {
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
}

module.exports = { onParentExit, ignoreOutputErrors };
