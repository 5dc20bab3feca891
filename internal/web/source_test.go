package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
	"github.com/memtrail/memtrail/internal/web"
)

// recordProgram records prog into a directory of the test.
func recordProgram(t *testing.T, prog string) string {
	t.Helper()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	var log strings.Builder
	res, err := record.Run(record.Options{Args: []string{prog}, Output: filepath.Join(t.TempDir(), "trace.mtr"),
		AgentPath: fixture.Agent(t), Stdin: devNull, Log: &log, Version: "test"})
	if err == nil {
		err = res.WriteErr
	}
	if err != nil {
		t.Fatalf("recording %s: %v\n%s", prog, err, log.String())
	}
	return res.Path
}

// getSource asks v for the source file path: the status and the text.
func getSource(t *testing.T, v *viewer, path string) (int, string) {
	status, text, _ := getSourceCut(t, v, path)
	return status, text
}

// getSourceCut is getSource, with the bytes served of a file cut short.
func getSourceCut(t *testing.T, v *viewer, path string) (int, string, int) {
	t.Helper()
	resp := v.get(t, "/api/source?path="+url.QueryEscape(path))
	defer resp.Body.Close()
	var body struct {
		Lines []string
		Error string
		Cut   int
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("source %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK && body.Error == "" {
		t.Errorf("source %s: status %d and no error", path, resp.StatusCode)
	}
	return resp.StatusCode, strings.Join(body.Lines, "\n"), body.Cut
}

// TestSourceNamedByTrace serves a trace whose program says its code is
// in /etc/shadow and in a relative name (#line): the server reads
// neither, nor the relative name in its working directory; with
// -source-dir, it reads the relative name there.
func TestSourceNamedByTrace(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// Without its build directory, the program's DWARF names the
	// relative name as it is.
	prog := fixture.Build(t, "testdata/names.c", "-g", "-O0", "-fdebug-prefix-map="+cwd+"=.")
	trace := recordProgram(t, prog)
	names := sourcesOf(t, trace)
	if !names["/etc/shadow"] || !names["relative-secret.c"] {
		t.Fatalf("the trace names %v, want /etc/shadow and relative-secret.c", names)
	}

	// The viewer runs where a relative-secret.c is.
	here := t.TempDir()
	if err := os.WriteFile(filepath.Join(here, "relative-secret.c"), []byte("the viewer's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(here)
	ts := serve(t, trace)
	for _, name := range []string{"/etc/shadow", "relative-secret.c"} {
		status, text := getSource(t, ts, name)
		if status != http.StatusForbidden || text != "" {
			t.Errorf("source %s: status %d, %d bytes; want 403 and nothing", name, status, len(text))
		}
	}

	// With -source-dir, the relative name is read there.
	sources := t.TempDir()
	if err := os.WriteFile(filepath.Join(sources, "relative-secret.c"), []byte("void *relative_alloc(size_t);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := web.New(trace)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SourceDir(sources); err != nil {
		t.Fatal(err)
	}
	withDir := serveServer(t, s)
	if status, text := getSource(t, withDir, "relative-secret.c"); status != http.StatusOK || !strings.Contains(text, "relative_alloc") {
		t.Errorf("source relative-secret.c under -source-dir: status %d, %q", status, text)
	}
	if status, text := getSource(t, withDir, "/etc/shadow"); status != http.StatusForbidden || text != "" {
		t.Errorf("source /etc/shadow with -source-dir: status %d, %d bytes; want 403 and nothing", status, len(text))
	}
	// Of a file bigger than 8 MiB, the first 8 MiB, and the answer says so.
	line := strings.Repeat("x", 99) + "\n"
	if err := os.WriteFile(filepath.Join(sources, "relative-secret.c"), []byte(strings.Repeat(line, 9<<20/len(line))), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, text, cut := getSourceCut(t, withDir, "relative-secret.c"); status != http.StatusOK || cut != 8<<20 || len(text) > 8<<20 || len(text) < 8<<20-len(line) {
		t.Errorf("source of 9 MiB: status %d, %d bytes, cut at %d; want the first 8 MiB, cut at 8 MiB", status, len(text), cut)
	}
}

// TestSourceSwappedForLink records a program whose source directory a
// second user owns; that user then swaps the source for a link to a file
// only root may read. Root's viewer served the source, and must not serve
// what the link leads to.
func TestSourceSwappedForLink(t *testing.T) {
	uid, gid := fixture.OtherUser(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Root's files, which only root may read: dir/root/secret and
	// dir/root/owned.c. The other user's: dir/home/src/owned.c.
	rootDir, home := filepath.Join(dir, "root"), filepath.Join(dir, "home")
	src := filepath.Join(home, "src")
	source := filepath.Join(src, "owned.c")
	secret := filepath.Join(rootDir, "secret")
	code, err := os.ReadFile("testdata/owned.c")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{rootDir, src} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{secret, filepath.Join(rootDir, "owned.c")} {
		if err := os.WriteFile(f, []byte("root's secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(source, code, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, src, source} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	// -iquote src: the cache of fixtures keeps a program per build
	// command, and this one names a new directory each time.
	trace := recordProgram(t, fixture.Build(t, source, "-g", "-O0", "-iquote", src))
	ts := serve(t, trace)
	if status, text := getSource(t, ts, source); status != http.StatusOK || !strings.Contains(text, "owned_alloc") {
		t.Fatalf("source %s, the other user's: status %d, %q; want it served", source, status, text)
	}

	if out, err := fixture.AsOtherUser(t, "ln", "-sf", secret, source).CombinedOutput(); err != nil {
		t.Fatalf("the other user swapping %s for a link: %v: %s", source, err, out)
	}
	if status, text := getSource(t, ts, source); status != http.StatusForbidden || strings.Contains(text, "secret") {
		t.Errorf("source %s, now a link to %s: status %d, %d bytes; want 403 and nothing", source, secret, status, len(text))
	}
	// A directory of the path swapped for a link is refused too.
	if out, err := fixture.AsOtherUser(t, "sh", "-c", `mv "$1" "$1.old" && ln -s "$2" "$1"`, "sh", src, rootDir).CombinedOutput(); err != nil {
		t.Fatalf("the other user swapping %s for a link: %v: %s", src, err, out)
	}
	if status, text := getSource(t, ts, source); status != http.StatusForbidden || strings.Contains(text, "secret") {
		t.Errorf("source %s, its directory now a link to %s: status %d, %d bytes; want 403 and nothing", source, rootDir, status, len(text))
	}
}
