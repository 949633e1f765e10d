// go-h2server: the minimal Go net/http HTTP/2 server the idle-memory experiment compares
// with (the measurement of Go 1.28's http2serveparking used Go's server; this is its pre-parking version, Debian's Go).
// h2 over TLS when -cert/-key are given (net/http's built-in HTTP/2), h2c with prior
// knowledge otherwise (golang.org/x/net/http2/h2c); HTTP/1.1 on the same port.  Static
// files from -root, and /-/delay?ms=N answered after a handler slept N ms (a long poll,
// for idle-memory --inflight); /-/sleeping counts the handlers asleep in it, so the
// harness can tell that every request is still waiting when it samples.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

var sleeping int64

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	root := flag.String("root", ".", "static files")
	cert := flag.String("cert", "", "TLS certificate (PEM); h2c without it")
	key := flag.String("key", "", "TLS key (PEM)")
	flag.Parse()
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(*root)))
	mux.HandleFunc("/-/delay", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
		if err != nil || ms < 0 || ms > 600000 {
			http.Error(w, "ms must be 0..600000", http.StatusBadRequest)
			return
		}
		atomic.AddInt64(&sleeping, 1)
		time.Sleep(time.Duration(ms) * time.Millisecond)
		atomic.AddInt64(&sleeping, -1)
		fmt.Fprintf(w, "waited %d ms\n", ms)
	})
	mux.HandleFunc("/-/sleeping", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d\n", atomic.LoadInt64(&sleeping))
	})
	var files http.Handler = mux
	h2 := &http2.Server{IdleTimeout: time.Hour}
	srv := &http.Server{Addr: *addr, IdleTimeout: time.Hour}
	if *cert != "" {
		srv.Handler = files
		if err := http2.ConfigureServer(srv, h2); err != nil {
			log.Fatal(err)
		}
		log.Fatal(srv.ListenAndServeTLS(*cert, *key))
	}
	srv.Handler = h2c.NewHandler(files, h2)
	log.Fatal(srv.ListenAndServe())
}
