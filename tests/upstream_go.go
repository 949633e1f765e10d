// An upstream for tests/e2e_proxy_peers.sh on Go's net/http (its own HTTP/1.1 server,
// chunking and keep-alive) and gorilla/websocket:
//
//	/sse?n=N&gap=MS    server-sent events: N events "data: I", one every MS ms, each flushed
//	/sse?n=N&hold=K    the same, each event after the first once /release?hold=K was asked
//	                   (after 20 s without: "data: unreleased", and the end)
//	/release?hold=K    lets /sse?hold=K send its next event
//	/poll?ms=MS        a long poll: answers "done MS" after MS ms
//	/cancelled         how many long polls their client gave up (the connection closed)
//	/ws                a WebSocket echo; the first message back is "hello"
//	/headers           the request's fields, one "name: value" line each, sorted
//	/upload            the request body's length and sha256, read as it streams
//	/trailer           a chunked body with a trailer (X-Checksum)
//	/conn              the remote address of the connection, so keep-alive can be counted
//
// Usage: upstream_go PORT
package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

func atoi(s string, def int) int {
	if v, err := strconv.Atoi(s); err == nil {
		return v
	}
	return def
}

// The releases of /sse?hold=K, by K.
var (
	holdsMu sync.Mutex
	holds   = map[string]chan struct{}{}
)

// Long polls whose client went away before they answered.
var pollsCancelled atomic.Int64

func hold(k string) chan struct{} {
	holdsMu.Lock()
	defer holdsMu.Unlock()
	if holds[k] == nil {
		holds[k] = make(chan struct{}, 64)
	}
	return holds[k]
}

func main() {
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	http.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		n, gap := atoi(r.URL.Query().Get("n"), 3), atoi(r.URL.Query().Get("gap"), 300)
		held := r.URL.Query().Get("hold")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		for i := 0; i < n; i++ {
			if i > 0 && held != "" {
				select {
				case <-hold(held):
				case <-time.After(20 * time.Second):
					fmt.Fprintf(w, "data: unreleased\n\n")
					return
				}
			} else if i > 0 {
				time.Sleep(time.Duration(gap) * time.Millisecond)
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	})
	http.HandleFunc("/release", func(w http.ResponseWriter, r *http.Request) {
		select {
		case hold(r.URL.Query().Get("hold")) <- struct{}{}:
		default:
		}
		fmt.Fprintf(w, "released\n")
	})
	http.HandleFunc("/poll", func(w http.ResponseWriter, r *http.Request) {
		ms := atoi(r.URL.Query().Get("ms"), 1000)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
			fmt.Fprintf(w, "done %d\n", ms)
		case <-r.Context().Done():
			pollsCancelled.Add(1) // net/http cancels it when the connection closes
		}
	})
	http.HandleFunc("/cancelled", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d\n", pollsCancelled.Load())
	})
	http.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		if c.WriteMessage(websocket.TextMessage, []byte("hello")) != nil {
			return
		}
		for {
			kind, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if c.WriteMessage(kind, msg) != nil {
				return
			}
		}
	})
	http.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		lines := []string{"host: " + r.Host}
		for k, v := range r.Header {
			lines = append(lines, strings.ToLower(k)+": "+strings.Join(v, ", "))
		}
		sort.Strings(lines)
		fmt.Fprintln(w, strings.Join(lines, "\n"))
	})
	http.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "%d %x\n", n, h.Sum(nil))
	})
	http.HandleFunc("/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		io.WriteString(w, "first part\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "second part\n")
		w.Header().Set("X-Checksum", "abc123")
	})
	http.HandleFunc("/conn", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, r.RemoteAddr)
	})
	srv := &http.Server{Addr: "127.0.0.1:" + os.Args[1], ErrorLog: log.New(io.Discard, "", 0)}
	log.Fatal(srv.ListenAndServe())
}
