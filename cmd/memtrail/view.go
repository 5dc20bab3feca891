package main

import (
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/memtrail/memtrail/internal/web"
)

func viewCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("view", "[-addr host:port] [-compare old-trace] [-source-dir dir] trace", "memtrail view -addr 127.0.0.1:8080 prog.mtr", stderr)
	addr := fs.String("addr", "127.0.0.1:0", "serve the UI on `host:port` (port 0: a free one); the default keeps it to this machine")
	compare := fs.String("compare", "", "also show what changed since the run of `old-trace` (as memtrail diff does)")
	sourceDir := fs.String("source-dir", "", "read the source files the trace names by relative names under `dir`, and any source file under it")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	if fs.NArg() != 1 {
		return 2, usageError{"needs exactly one trace file"}
	}
	// The trace is read before the server starts: one that cannot be
	// shown is an error here, not a broken page.
	srv, err := web.New(fs.Arg(0))
	if err != nil {
		return 1, err
	}
	if *compare != "" {
		if err := srv.Compare(*compare); err != nil {
			return 1, err
		}
	}
	if *sourceDir != "" {
		if err := srv.SourceDir(*sourceDir); err != nil {
			return 2, usageError{err.Error()}
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return 1, fmt.Errorf("cannot serve on %s: %w", *addr, err)
	}
	at := ln.Addr().(*net.TCPAddr)
	host := at.IP.String()
	if at.IP.IsUnspecified() {
		host = "127.0.0.1"
		fmt.Fprintf(stderr, "memtrail: serving on every interface, over plain HTTP: whoever sees the traffic can take the token, then read the trace and the source files it names\n")
	} else if !at.IP.IsLoopback() {
		fmt.Fprintf(stderr, "memtrail: serving on %s, over plain HTTP: whoever sees the traffic can take the token, then read the trace and the source files it names\n", at.IP)
	}
	// The token is the key to the trace: only who reads this line may
	// open it.
	url := fmt.Sprintf("http://%s/?token=%s", net.JoinHostPort(host, fmt.Sprint(at.Port)), srv.Token())
	fmt.Fprintf(stdout, "memtrail: %s is at %s (Ctrl-C stops)\n", fs.Arg(0), url)
	if err := http.Serve(ln, srv.Handler()); err != nil {
		return 1, err
	}
	return 0, nil
}
