// An authentication server for tests/e2e_auth.sh, on Go's net/http, behind h2park's
// auth_request - and the application it protects:
//
//	/auth       the subrequest: by the X-Token field, "good" is 200 with X-User: alice and
//	            X-Groups: admins (and a body, as servers send one), "good-nouser" is 200
//	            without X-User, "forbidden" is 403, "teapot" 418, "redirect" 302, "big"
//	            200 with a 1 MiB body, "slow" 200 after 3 s; anything else 401 with
//	            WWW-Authenticate: Bearer realm="test".  It records what it was sent.
//	/last       what the last /auth was sent: method, URI, body length, and its fields
//	/count      how many /auth requests came, and over how many connections
//	/app/...    the protected application: the X-User, X-Groups and X-Token it was sent
//
// Usage: upstream_auth PORT
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

type connKey struct{}

var (
	mu    sync.Mutex
	last  string
	count int
	conns = map[string]bool{}
)

func auth(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var names []string
	for name, values := range r.Header {
		for _, v := range values {
			names = append(names, strings.ToLower(name)+": "+v)
		}
	}
	sort.Strings(names)
	mu.Lock()
	count++
	conns[r.Context().Value(connKey{}).(string)] = true
	last = fmt.Sprintf("method: %s\nuri: %s\nbody: %d\nhost: %s\n%s\n", r.Method, r.RequestURI, len(body), r.Host,
		strings.Join(names, "\n"))
	mu.Unlock()
	switch r.Header.Get("X-Token") {
	case "good":
		w.Header().Set("X-User", "alice")
		w.Header().Set("X-Groups", "admins")
		io.WriteString(w, "welcome\n")
	case "good-nouser":
		io.WriteString(w, "welcome, nobody\n")
	case "forbidden":
		w.WriteHeader(403)
	case "teapot":
		w.WriteHeader(418)
	case "redirect":
		http.Redirect(w, r, "/login", 302)
	case "big":
		w.Header().Set("X-User", "big")
		w.Write(make([]byte, 1<<20))
	case "slow":
		time.Sleep(3 * time.Second)
		w.Header().Set("X-User", "slow")
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="test"`)
		w.WriteHeader(401)
		io.WriteString(w, "who are you?\n")
	}
}

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("/auth", auth)
	mux.HandleFunc("/last", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		io.WriteString(w, last)
	})
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%d %d\n", count, len(conns))
	})
	mux.HandleFunc("/app/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "user=%q groups=%q token=%q\n", strings.Join(r.Header.Values("X-User"), ","),
			strings.Join(r.Header.Values("X-Groups"), ","), r.Header.Get("X-Token"))
	})
	connContext := func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c.RemoteAddr().String())
	}
	// upstream_auth PORT [TLSPORT CERT KEY]: the same handlers over TLS too.
	if len(os.Args) == 5 {
		tlsSrv := &http.Server{Addr: "127.0.0.1:" + os.Args[2], Handler: mux, ConnContext: connContext}
		go func() { log.Fatal(tlsSrv.ListenAndServeTLS(os.Args[3], os.Args[4])) }()
	}
	srv := &http.Server{Addr: "127.0.0.1:" + os.Args[1], Handler: mux, ConnContext: connContext}
	log.Fatal(srv.ListenAndServe())
}
