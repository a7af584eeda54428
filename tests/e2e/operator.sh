#!/usr/bin/env bash
# Start, stop or kill the operator under test as a host process (spec 08 §9.2: by pid, never by
# name). tests/e2e/run.sh writes its environment to $NODEWRIGHT_RUN/operator.env first; the e2e
# suite calls this script (NODEWRIGHT_E2E_OPERATOR_CTL) to kill and restart the operator.
#
# Usage: tests/e2e/operator.sh start|stop|kill|restart|status
#   start    start unless running, wait until /readyz answers ok (60 s)
#   stop     SIGTERM, SIGKILL after 15 s
#   kill     SIGKILL (a crash)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/env.sh"

alive() { # prints the pid if the recorded process still runs the operator
  local pid
  [ -f "$OPERATOR_PID" ] || return 1
  pid=$(cat "$OPERATOR_PID")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q nodewright-operator || return 1
  echo "$pid"
}

ready() { [ "$(curl -fsS --max-time 2 "http://127.0.0.1:$E2E_PROBE_PORT/readyz" 2>/dev/null)" = ok ]; }

wait_gone() { # pid seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do [ -d "/proc/$1" ] || return 0; sleep 0.1; done
  return 1
}

start() {
  local pid i
  [ -f "$OPERATOR_ENV" ] || { e2e_say "no $OPERATOR_ENV: run tests/e2e/run.sh"; exit 1; }
  if ! pid=$(alive); then
    mkdir -p "$(dirname "$OPERATOR_PID")" "$(dirname "$OPERATOR_LOG")"
    (
      set -a
      # shellcheck disable=SC1090
      . "$OPERATOR_ENV"
      set +a
      if [ -n "${E2E_TRACE_DIR:-}" ]; then
        # one trace per operator process, replayed by run.sh after the suite (docs/simulator.md)
        mkdir -p "$E2E_TRACE_DIR"
        n=$(find "$E2E_TRACE_DIR" -name 'operator-*.jsonl' | wc -l)
        export NODEWRIGHT_TRACE
        NODEWRIGHT_TRACE=$(printf '%s/operator-%03d.jsonl' "$E2E_TRACE_DIR" $((n + 1)))
      fi
      echo "=== start $(date -u +%FT%TZ)" >> "$OPERATOR_LOG"
      setsid "$NODEWRIGHT_OPERATOR_BIN" >> "$OPERATOR_LOG" 2>&1 < /dev/null &
      echo $! > "$OPERATOR_PID"
    )
    pid=$(cat "$OPERATOR_PID")
    e2e_say "operator started (pid $pid, log $OPERATOR_LOG)"
  fi
  for ((i = 0; i < 600; i++)); do
    ready && { e2e_say "operator ready"; return 0; }
    [ -d "/proc/$pid" ] || { tail -n 40 "$OPERATOR_LOG" >&2; e2e_say "operator exited"; exit 1; }
    sleep 0.1
  done
  tail -n 40 "$OPERATOR_LOG" >&2
  e2e_say "operator not ready after 60 s: $(curl -sS "http://127.0.0.1:$E2E_PROBE_PORT/readyz" 2>&1)"
  exit 1
}

stop() { # signal
  local pid
  pid=$(alive) || { rm -f "$OPERATOR_PID"; return 0; }
  kill "-$1" "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" 15; then
    e2e_say "operator (pid $pid) ignored SIG$1 for 15 s; SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || true
  fi
  echo "=== SIG$1 $(date -u +%FT%TZ)" >> "$OPERATOR_LOG"
  rm -f "$OPERATOR_PID"
  e2e_say "operator stopped (SIG$1, pid $pid)"
}

case "${1:-}" in
  start) start ;;
  stop) stop TERM ;;
  kill) stop KILL ;;
  restart) stop TERM; start ;;
  status) if pid=$(alive); then echo "running (pid $pid)"; else echo stopped; exit 1; fi ;;
  *) echo "usage: $0 start|stop|kill|restart|status" >&2; exit 2 ;;
esac
