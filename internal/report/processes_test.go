package report_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/report"
)

// TestPIDReused reports on a trace where the system gave pid 101 to two
// fork children in turn: -pid 101 alone is ambiguous, and says which to
// choose from; 101.1 and 101.2 name each.
func TestPIDReused(t *testing.T) {
	m := analyze(t, encode(t, `info time-unit=1 command=[./prog]
process id=1 pid=100 time=0 exe=/bin/prog args=[prog]
thread process=1 index=1 tid=100
fork process=1 child=2 time=10
process id=2 pid=101 ppid=100 parent=1 time=10 exe=/bin/prog args=[prog one]
thread process=2 index=1 tid=101 time=10
alloc process=2 thread=1 time=15 api=malloc addr=0x1000 size=10 stack=0
process-end id=2 time=20 how=exited code=0
fork process=1 child=3 time=30
process id=3 pid=101 ppid=100 parent=1 time=30 exe=/bin/prog args=[prog two]
thread process=3 index=1 tid=101 time=30
alloc process=3 thread=1 time=35 api=malloc addr=0x1000 size=20 stack=0
process-end id=3 time=40 how=exited code=0
process-end id=1 time=50 how=exited code=0
end time=50 events=2
`))
	err := report.Text(new(strings.Builder), m, report.Options{PID: 101})
	want := "pid 101 was given to several processes in this trace; choose one with -pid 101.N: " +
		"101.1 (prog one, exited with status 0), 101.2 (prog two, exited with status 0)"
	if err == nil || err.Error() != want {
		t.Errorf("-pid 101: %v, want %q", err, want)
	}
	for image, args := range map[int]string{1: "prog one", 2: "prog two"} {
		var out strings.Builder
		if err := report.Text(&out, m, report.Options{PID: 101, Image: image}); err != nil {
			t.Fatalf("-pid 101.%d: %v", image, err)
		}
		if !strings.HasPrefix(out.String(), args+"  (/bin/prog)\n") {
			t.Errorf("-pid 101.%d: the report is not on %q:\n%s", image, args, out.String())
		}
	}
}

// TestWarningsNameImages: the warnings about two images of pid 101 (a
// zygote that exec'd itself again) name each as -pid does, 101.1 and
// 101.2, and a pid of one image by its pid alone.
func TestWarningsNameImages(t *testing.T) {
	m := analyze(t, encode(t, `info time-unit=1 command=[./prog]
process id=1 pid=100 time=0 exe=/bin/prog args=[prog]
thread process=1 index=1 tid=100
lost process=1 count=1 reason="memtrail's buffer in the process was damaged (a)"
fork process=1 child=2 time=10
process id=2 pid=101 ppid=100 parent=1 time=10 exe=/bin/prog args=[prog one]
thread process=2 index=1 tid=101 time=10
lost process=2 count=1 reason="memtrail's buffer in the process was damaged (b)"
process-end id=2 time=20 how=exec
process id=3 pid=101 ppid=100 parent=1 time=20 exe=/bin/prog args=[prog two]
thread process=3 index=1 tid=101 time=20
lost process=3 count=1 reason="memtrail's buffer in the process was damaged (c)"
process-end id=3 time=40 how=exited code=0
process-end id=1 time=50 how=exited code=0
end time=50 events=0
`))
	var got []string
	for _, w := range m.AllWarnings() {
		name, _, _ := strings.Cut(w, ":")
		got = append(got, name)
	}
	if want := []string{"pid 100", "pid 101.1", "pid 101.2"}; !slices.Equal(got, want) {
		t.Errorf("the warnings name %q, want %q:\n%s", got, want, strings.Join(m.AllWarnings(), "\n"))
	}
}
