#!/bin/bash
# Compression on the fly (compress, compress_types, compress_min_length, compress_level_*):
# every response decoded by Debian's decoders (python3's zlib, python3-brotli,
# python3-zstandard) and compared byte for byte with what was compressed, over HTTP/1.1,
# h2c and TLS, for static files and for bodies proxied from an upstream (tests/compress_peer.py);
# curl --compressed as a client; each rule: Vary on what could be compressed, the weak
# ETag, no Accept-Ranges or Content-Length, Range and 304 and HEAD, no-transform, an
# upstream's own Content-Encoding untouched, compress_min_length, compress_types, compress
# = off in a location, precompressed files first; a client asking with odd q-values; a
# server-sent-event stream whose every event is decoded before the upstream sends the next;
# 200 MiB through the compressor with the daemon's resident memory flat; compress_memory's
# bound; /metrics and the access log; configuration errors.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
PEER="$HERE/compress_peer.py"
command -v curl >/dev/null || { echo "ok compress # SKIP curl not installed"; exit 0; }
$PY -c 'import brotli, zstandard, h2' 2>/dev/null ||
  { echo "ok compress # SKIP python3-brotli, python3-zstandard or python3-h2 not installed"; exit 0; }

W="$TMP/www"
$PY - "$W" <<'EOF'
import json, os, random, sys
w = sys.argv[1]
random.seed(47)
rows = [{"id": i, "name": "user%d" % i, "email": "u%d@example.com" % i, "score": random.random(),
         "tags": ["a", "b", "c"][: i % 3]} for i in range(3000)]
open(os.path.join(w, "data.json"), "w").write(json.dumps(rows))
open(os.path.join(w, "page.html"), "w").write("<!doctype html><title>t</title>" +
    "".join("<p class=row id=r%d>row %d of the page, %s</p>\n" % (i, i, "x" * (i % 70)) for i in range(4000)))
open(os.path.join(w, "small.json"), "w").write('{"a": 1}')
open(os.path.join(w, "image.png"), "wb").write(b"\x89PNG\r\n\x1a\n" + bytes(random.getrandbits(8) for _ in range(40000)))
open(os.path.join(w, "pre.txt"), "w").write("plain text that has a precompressed twin\n" * 100)
os.makedirs(os.path.join(w, "htmlonly"))
open(os.path.join(w, "htmlonly", "d.json"), "w").write(json.dumps(rows[:500]))
os.makedirs(os.path.join(w, "off"))
open(os.path.join(w, "off", "d.json"), "w").write(json.dumps(rows[:500]))
EOF
gzip -9 -k -n "$W/pre.txt"
chmod -R a+rX "$W"

UP=$(free_port)
mkdir -p "$TMP/acks"
$PY "$PEER" upstream "$UP" "$TMP/acks" & PIDS="$PIDS $!"
for i in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$UP/json" && break; sleep 0.1; done

{ proxy_conf_head compress
  cat <<EOF
compress = zstd br gzip
location /up/ {
    proxy_pass = http://127.0.0.1:$UP/
    proxy_read_timeout = 30s
}
location /htmlonly/ {
    compress_types = text/html
}
location /off/ {
    compress = off
}
location /gzonly/ {
    alias = $W/
    compress = gzip
    compress_level_gzip = 9
}
EOF
} > "$TMP/c.conf"
start_config "$TMP/c.conf" "$P" || { fail compress_start "$(cat "$TMP/daemon.log")"; exit 0; }

# fetch NAME PROTO PATH [curl args...]: headers in $TMP/NAME.h, the raw body in $TMP/NAME.b
fetch() {
  local name=$1 proto=$2 path=$3; shift 3
  case $proto in
    h1) curl -s -D "$TMP/$name.h" -o "$TMP/$name.b" "$@" "http://127.0.0.1:$P$path" ;;
    h2c) curl -s --http2-prior-knowledge -D "$TMP/$name.h" -o "$TMP/$name.b" "$@" "http://127.0.0.1:$P$path" ;;
    tls) curl -s -k --http2 -D "$TMP/$name.h" -o "$TMP/$name.b" "$@" "https://127.0.0.1:$T$path" ;;
  esac
}
# field NAME FIELD: the value of FIELD in NAME's response head ("" if none)
field() { grep -i "^$2:" "$TMP/$1.h" | head -1 | sed 's/^[^:]*: *//; s/\r$//'; }
# same_as NAME CODING REF: NAME's body decoded with CODING is REF's bytes
same_as() { $PY "$PEER" decode "$2" "$TMP/$1.b" | cmp -s - "$3"; }

# Bodies to decode, checked in one run of the decoders (python's start is the slow part):
# queue NAME CODING REF, then decode_queued, then decoded_ok NAME.
queue() { echo "$1 $2 $TMP/$1.b $3" >> "$TMP/queue"; }
decode_queued() { $PY "$PEER" same "$TMP/queue" > "$TMP/decoded"; rm -f "$TMP/queue"; }
decoded_ok() { grep -qx "$1 ok" "$TMP/decoded"; }

# Static files and proxied bodies, every coding, every protocol: decoded byte for byte.
"$PY" -c "import sys; sys.path.insert(0, '$HERE'); import compress_peer; sys.stdout.buffer.write(compress_peer.payload())" > "$TMP/payload.json"
for proto in h1 h2c tls; do
  for coding in gzip br zstd; do
    for what in static:/data.json:$W/data.json static_html:/page.html:$W/page.html \
                proxied:/up/json:$TMP/payload.json proxied_chunked:/up/chunked:$TMP/payload.json; do
      IFS=: read -r kind path ref <<< "$what"
      n=${kind}_${proto}_${coding}
      fetch "$n" "$proto" "$path" -H "Accept-Encoding: $coding"
      queue "$n" "$coding" "$ref"
    done
  done
done
decode_queued
for proto in h1 h2c tls; do
  for coding in gzip br zstd; do
    for kind in static static_html proxied proxied_chunked; do
      n=${kind}_${proto}_${coding}
      enc=$(field "$n" content-encoding); vary=$(field "$n" vary); cl=$(field "$n" content-length)
      ar=$(field "$n" accept-ranges)
      decoded_ok "$n" && [ "$enc" = "$coding" ] && [ "$vary" = accept-encoding ] && [ -z "$cl" ] && [ -z "$ar" ]
      check "$n" $? "encoding '$enc', vary '$vary', content-length '$cl', accept-ranges '$ar', $(stat -c %s "$TMP/$n.b") bytes"
    done
  done
done

# The strong ETag made weak; without Accept-Encoding: as it is, strong, with Vary.
fetch etag h1 /data.json -H 'Accept-Encoding: gzip'
fetch plain h1 /data.json
STRONG=$(field plain etag)
[ "$(field etag etag)" = "W/$STRONG" ] && [ "${STRONG:0:1}" = '"' ] && [ "$(field plain vary)" = accept-encoding ] &&
  [ -z "$(field plain content-encoding)" ] && [ "$(field plain content-length)" = "$(stat -c %s "$W/data.json")" ] &&
  cmp -s "$TMP/plain.b" "$W/data.json"
check etag_weak_and_identity_strong $? "compressed etag '$(field etag etag)', plain '$STRONG', vary '$(field plain vary)'"

# 304 to the weak tag: what the 200 says of validity (its weak ETag, Vary), no body.
fetch nm h1 /data.json -H 'Accept-Encoding: gzip' -H "If-None-Match: W/$STRONG"
grep -q '^HTTP/1.1 304' "$TMP/nm.h" && [ "$(field nm etag)" = "W/$STRONG" ] && [ "$(field nm vary)" = accept-encoding ] &&
  [ ! -s "$TMP/nm.b" ]
check not_modified_304_weak_etag_vary $? "$(head -1 "$TMP/nm.h") etag '$(field nm etag)' vary '$(field nm vary)'"

# ... and to the strong tag (a client that holds the file as it is): the strong ETag, Vary.
fetch nms h1 /data.json -H 'Accept-Encoding: gzip' -H "If-None-Match: $STRONG"
grep -q '^HTTP/1.1 304' "$TMP/nms.h" && [ "$(field nms etag)" = "$STRONG" ] && [ "$(field nms vary)" = accept-encoding ]
check not_modified_304_strong_etag_kept $? "$(head -1 "$TMP/nms.h") etag '$(field nms etag)' vary '$(field nms vary)'"

# Range: never compressed (206 of the file's own bytes).
fetch range h2c /data.json -H 'Accept-Encoding: gzip, br, zstd' -H 'Range: bytes=10-109'
grep -q '^HTTP/2 206' "$TMP/range.h" && [ -z "$(field range content-encoding)" ] && [ "$(stat -c %s "$TMP/range.b")" = 100 ] &&
  cmp -s "$TMP/range.b" <(tail -c +11 "$W/data.json" | head -c 100)
check range_not_compressed $? "$(head -1 "$TMP/range.h") encoding '$(field range content-encoding)'"

# HEAD: the fields a GET gets, no body, no Content-Length.
for proto in h1 h2c; do
  fetch head_$proto $proto /data.json -I -H 'Accept-Encoding: br'
  fetch get_$proto $proto /data.json -H 'Accept-Encoding: br'
  [ "$(field head_$proto content-encoding)" = br ] && [ "$(field head_$proto etag)" = "$(field get_$proto etag)" ] &&
    [ "$(field head_$proto vary)" = accept-encoding ] && [ -z "$(field head_$proto content-length)" ]
  check head_same_fields_$proto $? "$(tr -d '\r' < "$TMP/head_$proto.h" | tr '\n' '|')"
done

# Cache-Control: no-transform and an upstream's own Content-Encoding: untouched.
fetch nt h1 /up/notransform -H 'Accept-Encoding: gzip'
[ -z "$(field nt content-encoding)" ] && cmp -s "$TMP/nt.b" "$TMP/payload.json"
check no_transform_untouched $? "encoding '$(field nt content-encoding)'"
for proto in h1 h2c tls; do
  fetch enc_$proto $proto /up/encoded -H 'Accept-Encoding: zstd, br, gzip'
  head -c 5000 "$TMP/payload.json" > "$TMP/payload5k"
  [ "$(field enc_$proto content-encoding)" = gzip ] && [ "$(grep -ci '^content-encoding:' "$TMP/enc_$proto.h")" = 1 ] &&
    same_as enc_$proto gzip "$TMP/payload5k"
  check upstream_encoding_passed_untouched_$proto $? "$(grep -i '^content-encoding' "$TMP/enc_$proto.h" | tr -d '\r' | tr '\n' '|')"
done

# Under compress_min_length, of a type not listed, in a location with other types or off.
fetch small h1 /small.json -H 'Accept-Encoding: gzip'
[ -z "$(field small content-encoding)" ] && [ -z "$(field small vary)" ] && cmp -s "$TMP/small.b" "$W/small.json"
check under_min_length_as_is $? "encoding '$(field small content-encoding)' vary '$(field small vary)'"
fetch png h2c /image.png -H 'Accept-Encoding: gzip'
[ -z "$(field png content-encoding)" ] && cmp -s "$TMP/png.b" "$W/image.png"
check type_not_listed_as_is $? "encoding '$(field png content-encoding)'"
fetch hj h1 /htmlonly/d.json -H 'Accept-Encoding: gzip'
[ -z "$(field hj content-encoding)" ] && cmp -s "$TMP/hj.b" "$W/htmlonly/d.json"
check compress_types_in_location $? "encoding '$(field hj content-encoding)'"
fetch off h1 /off/d.json -H 'Accept-Encoding: gzip'
[ -z "$(field off content-encoding)" ] && [ -z "$(field off vary)" ] && cmp -s "$TMP/off.b" "$W/off/d.json"
check compress_off_in_location $? "encoding '$(field off content-encoding)'"
fetch gzo h1 /gzonly/data.json -H 'Accept-Encoding: zstd, br, gzip'
[ "$(field gzo content-encoding)" = gzip ] && same_as gzo gzip "$W/data.json"
check compress_list_in_location $? "encoding '$(field gzo content-encoding)'"

# A precompressed file beside the file still wins: its bytes, as they are on disk.
fetch pre h1 /pre.txt -H 'Accept-Encoding: gzip'
[ "$(field pre content-encoding)" = gzip ] && cmp -s "$TMP/pre.b" "$W/pre.txt.gz"
check precompressed_file_wins $? "encoding '$(field pre content-encoding)', $(stat -c %s "$TMP/pre.b") bytes"

# A client that asks for every coding with odd q-values.
QV=$(cat <<'EOF'
gzip;q=0.5, br;q=0.501, zstd;q=0.0, identity;q=0.1, *;q=0|br
zstd;q=1.0001, gzip, br;q=0.9|gzip
GZIP;Q=0.3 , Br;q=0.2|gzip
*;q=0.2, zstd;q=0.1|br
identity;q=0|
gzip;q=0, br;q=0, zstd;q=0, *|
gzip;q=0.001, identity;q=0.002|
x-gzip|gzip
zstd, zstd;q=0, br;q=0.000, gzip;q=0.1|gzip
 , ;q=1, "br", gzip;q=.5, zstd;q=0.25|zstd
EOF
)
i=0
while IFS='|' read -r ae want; do
  i=$((i + 1)); fetch q$i h2c /data.json -H "Accept-Encoding: $ae"; queue q$i "${want:-identity}" "$W/data.json"
done <<< "$QV"
decode_queued
i=0
while IFS='|' read -r ae want; do
  i=$((i + 1)); got=$(field q$i content-encoding)
  decoded_ok q$i && [ "$got" = "$want" ]
  check "qvalues '$ae'" $? "got '$got', want '$want'"
done <<< "$QV"

# curl --compressed: the body curl decodes itself.
for proto in h1 h2c tls; do
  case $proto in
    h1) curl -s --compressed -o "$TMP/cc.b" -D "$TMP/cc.h" "http://127.0.0.1:$P/page.html" ;;
    h2c) curl -s --compressed --http2-prior-knowledge -o "$TMP/cc.b" -D "$TMP/cc.h" "http://127.0.0.1:$P/up/json" ;;
    tls) curl -s --compressed -k -o "$TMP/cc.b" -D "$TMP/cc.h" "https://127.0.0.1:$T/up/chunked" ;;
  esac
  ref=$W/page.html; [ $proto = h1 ] || ref=$TMP/payload.json
  cmp -s "$TMP/cc.b" "$ref" && [ -n "$(field cc content-encoding)" ]
  check curl_compressed_$proto $? "encoding '$(field cc content-encoding)'"
done

# Server-sent events through the proxy: each decoded before the upstream sends the next.
for proto in h1 h2c tls; do
  for coding in gzip br zstd; do
    port=$P; [ $proto = tls ] && port=$T
    scheme=http; [ $proto = tls ] && scheme=https
    out=$(timeout 120 $PY "$PEER" sse "$scheme://127.0.0.1:$port/up/sse?n=12&id=$proto$coding" $proto $coding 12 \
          "$proto$coding" "$TMP/acks" 2>&1)
    [ "$out" = "ok 12" ]
    check sse_events_on_time_${proto}_$coding $? "$out"
  done
done

# 200 MiB through the compressor, streamed: the daemon's resident memory stays flat.
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$DPID/status"; }
curl -s -H 'Accept-Encoding: gzip' -o /dev/null "http://127.0.0.1:$P/up/big?mib=8"
BASE=$(rss)
echo 0 > "$TMP/rss.max"
( while kill -0 "$DPID" 2>/dev/null && [ ! -e "$TMP/big.done" ]; do
    r=$(rss); [ "$r" -gt "$(cat "$TMP/rss.max")" ] && echo "$r" > "$TMP/rss.max"; sleep 0.1
  done ) & PIDS="$PIDS $!"
BIG_START=$SECONDS
GOT=$(curl -s --http2-prior-knowledge -H 'Accept-Encoding: zstd' "http://127.0.0.1:$P/up/big?mib=200" | $PY "$PEER" bigsum zstd)
touch "$TMP/big.done"
WANT=$($PY "$PEER" bigref 200)
MAX=$(cat "$TMP/rss.max")
echo "# 200 MiB zstd through the proxy in $((SECONDS - BIG_START)) s: RSS $BASE KiB before, at most $MAX KiB during"
[ "$GOT" = "$WANT" ] && [ "$MAX" -gt 0 ] && [ $((MAX - BASE)) -lt $((16 * 1024)) ]
check big_stream_rss_flat $? "decoded '$GOT', want '$WANT'; RSS $BASE -> $MAX KiB"

# /metrics: bytes in and out of the compressors by coding; the access log names the coding.
M=$(curl -s "http://127.0.0.1:$P/metrics")
in_z=$(printf '%s\n' "$M" | sed -n 's/^h2park_compress_in_bytes_total{encoding="zstd"} //p')
out_z=$(printf '%s\n' "$M" | sed -n 's/^h2park_compress_out_bytes_total{encoding="zstd"} //p')
n_g=$(printf '%s\n' "$M" | sed -n 's/^h2park_compressed_responses_total{encoding="gzip"} //p')
$PY -c "import sys; i, o, n = float('$in_z'), float('$out_z'), float('$n_g'); sys.exit(0 if i > 200 * 2**20 and 0 < o < i / 4 and n >= 10 else 1)"
check metrics_compress_bytes $? "zstd in $in_z out $out_z, gzip responses $n_g"
sleep 0.2
grep '"/data.json"' "$TMP/compress.access" | grep -q '"content_encoding":"br"' &&
  grep '"/small.json"' "$TMP/compress.access" | grep -vq content_encoding &&
  tail -1 "$TMP/compress.access" | $PY -c 'import json, sys; json.loads(sys.stdin.read())'
check access_log_encoding $? "$(grep '"/data.json"' "$TMP/compress.access" | head -1)"
stop_daemon

# compress_memory: a worker's compressors hold at most about that much. 1m here, which one
# zstd stream's state (1.3 MiB) passes: a stream X begins (its head, no body yet: no state),
# a stream Y gets its first event (its state counted), then X's first event comes - X's
# state is made small (lowered) and still decodes whole; a new response is sent as it is
# (skipped, with its Vary) while Y holds its state; once Y is gone, compression again.
{ proxy_conf_head budget
  printf 'compress = zstd gzip\ncompress_memory = 1m\nlocation /up/ {\n    proxy_pass = http://127.0.0.1:%s/\n    proxy_read_timeout = 30s\n}\n' "$UP"
} > "$TMP/b.conf"
start_config "$TMP/b.conf" "$P" || { fail compress_budget_start "$(cat "$TMP/daemon.log")"; exit 0; }
metric() { curl -s "http://127.0.0.1:$P/metrics" | sed -n "s/^$1 //p"; }
timeout 60 $PY "$PEER" sse "http://127.0.0.1:$P/up/sse?n=2&id=bx&delay=1.5" h1 zstd 2 bx "$TMP/acks" > "$TMP/bx.out" 2>&1 &
BX=$!; PIDS="$PIDS $BX"
for i in $(seq 1 100); do [ "$(metric 'h2park_compressed_responses_total{encoding="zstd"}')" = 1 ] && break; sleep 0.05; done
curl -s -N -H 'Accept-Encoding: zstd' -o "$TMP/by.b" "http://127.0.0.1:$P/up/sse?n=2&id=by" & BY=$!; PIDS="$PIDS $BY"
for i in $(seq 1 100); do [ "$(metric h2park_compress_state_bytes)" -gt $((1 << 20)) ] 2>/dev/null && break; sleep 0.1; done
fetch over h1 /data.json -H 'Accept-Encoding: zstd'
STATE=$(metric h2park_compress_state_bytes)
[ -z "$(field over content-encoding)" ] && [ "$(field over vary)" = accept-encoding ] && cmp -s "$TMP/over.b" "$W/data.json" &&
  [ "$(metric h2park_compress_skipped_total)" = 1 ]
check budget_used_new_response_as_is $? "state $STATE bytes; encoding '$(field over content-encoding)', skipped $(metric h2park_compress_skipped_total)"
wait $BX
[ "$(cat "$TMP/bx.out")" = "ok 2" ] && [ "$(metric h2park_compress_lowered_total)" = 1 ]
check budget_used_stream_made_small_decodes $? "$(cat "$TMP/bx.out"); lowered $(metric h2park_compress_lowered_total)"
kill $BY 2>/dev/null
for i in $(seq 1 150); do [ "$(metric h2park_compress_state_bytes)" = 0 ] && break; sleep 0.1; done
fetch after h1 /data.json -H 'Accept-Encoding: zstd'
[ "$(field after content-encoding)" = zstd ] && [ "$(metric h2park_compress_state_bytes)" = 0 ]
check budget_free_again $? "state $(metric h2park_compress_state_bytes); encoding '$(field after content-encoding)'"
stop_daemon

# Configuration errors name the file and line, exit 2.
while IFS='|' read -r line want; do
  printf 'listen = 127.0.0.1:%s\nroot = %s\n%s\n' "$(free_port)" "$W" "$line" > "$TMP/bad.conf"
  config_error "config '$line'" "bad.conf:3: $want" -c "$TMP/bad.conf" --check
done <<'EOF'
compress = deflate|compress: 'deflate' is not gzip, br or zstd
compress = gzip br gzip|compress: gzip is named twice
compress = |compress
compress_types = json|compress_types: 'json' is not a media type
compress_types = text/ html|compress_types: 'text/' is not a media type
compress_min_length = ten|compress_min_length: 'ten' is not a size
compress_level_gzip = 10|compress_level_gzip: '10' is not a level of gzip (1 to 9)
compress_level_gzip = 0|compress_level_gzip: '0' is not a level of gzip (1 to 9)
compress_level_br = 12|compress_level_br: '12' is not a level of br (0 to 11)
compress_level_zstd = 23|compress_level_zstd: '23' is not a level of zstd (1 to 22)
compress_memory = 100k|compress_memory: '100k' is not a size of at least 1m
EOF
