#!/bin/bash
# The docs cannot drift from what they describe: the configuration reference against the
# keys the parser accepts and config/default.conf, the metrics and stats references
# against a running daemon's /metrics and /-/stats, the Options table and --help against
# main.c's options, the README's examples against config/examples/ (which
# e2e_examples.sh runs), every link; and the manual, made from the docs, has the usual
# sections, no Markdown left in it and nothing man --warnings complains of.
. "$(dirname "$0")/lib.sh"
make_site

python3 tests/docs_check.py keys "$H2PARK" options "$H2PARK" links readme
# With an upstream, so that /metrics has the reverse proxy's families too.
printf 'location /proxied/ {\n    proxy_pass = http://127.0.0.1:9\n}\n' > "$TMP/proxy.conf"
start_daemon -c "$TMP/proxy.conf"
python3 tests/docs_check.py metrics "http://127.0.0.1:$PORT/metrics" stats "http://127.0.0.1:$PORT/-/stats"
stop_daemon

MAN=$BUILD/h2park.8
if [ -f "$MAN" ] && command -v man >/dev/null; then
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$MAN" 2>&1 >/dev/null)
  [ -z "$warnings" ]; check man_warnings_none $? "$warnings"
  sections=$(sed -n 's/^\.SH //p' "$MAN" | tr '\n' '|')
  want='NAME|SYNOPSIS|DESCRIPTION|OPTIONS|CONFIGURATION|SIGNALS|ENVIRONMENT|FILES|EXIT STATUS|'
  # In this order, with BUGS and SEE ALSO allowed after EXIT STATUS.
  [[ "$sections" == "$want"* ]] && [[ "$sections" == *"SEE ALSO|" ]]
  check man_sections_in_order $? "$sections"
  text=$(LC_ALL=C.UTF-8 MANWIDTH=100 man -l "$MAN" 2>/dev/null)
  ! grep -n '`\|\*\*\|](' <<< "$text" >"$TMP/markdown" && ! grep -q 'req_respond\|struct request' <<< "$text"
  check man_no_markdown_or_route_api $? "$(head -3 "$TMP/markdown")"
  for opt in $(sed -n 's/^ *{ *"\([a-z-]*\)", [a-z_]*_argument.*/\1/p' server/main.c | sort -u); do
    grep -q -- "--$opt" <<< "$text" || echo "--$opt" >> "$TMP/man-missing"
  done
  for sig in SIGHUP SIGUSR1 SIGTERM SIGINT H2PARK_DEBUG LISTEN_FDS NOTIFY_SOCKET; do
    grep -q "$sig" <<< "$text" || echo "$sig" >> "$TMP/man-missing"
  done
  [ ! -s "$TMP/man-missing" ]; check man_names_options_signals_environment $? "missing: $(cat "$TMP/man-missing" 2>/dev/null | tr "\n" " ")"
else
  echo "ok man_warnings_none # SKIP no $MAN or no man (apt-get install man-db)"
fi
