package main

import "testing"

func TestParseSize(t *testing.T) {
	good := map[string]uint64{"4096": 4096, "64KiB": 64 << 10, "1.5MiB": 3 << 19, "2GiB": 2 << 30,
		"1 MiB": 1 << 20, "8kb": 8 << 10, "3M": 3 << 20, "0": 0, "12B": 12}
	for in, want := range good {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5 XB", "lots"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}
