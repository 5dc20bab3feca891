package record

import "testing"

func TestIsSystemLibrary(t *testing.T) {
	for path, want := range map[string]bool{
		"/lib/x86_64-linux-gnu/libc.so.6":               true,
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6":      true,
		"/lib64/ld-linux-x86-64.so.2":                   true,
		"/usr/lib64/libm.so.6":                          true,
		"/nix/store/abc-glibc/lib/ld-linux-x86-64.so.2": true,
		"/usr/local/lib/libfoo.so":                      false,
		"/usr/libexec/helper":                           false,
		"/usr/bin/sqlite3":                              false,
		"/home/me/build/libwidgets.so":                  false,
		"/opt/app/lib/libapp.so":                        false,
	} {
		if got := isSystemLibrary(path); got != want {
			t.Errorf("isSystemLibrary(%q) = %v, want %v", path, got, want)
		}
	}
}
