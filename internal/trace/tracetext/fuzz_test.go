package tracetext_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memtrail/memtrail/internal/trace/tracetext"
)

// FuzzFormat checks that whatever Parse accepts, Format writes in a form
// that Parse reads back to the same records.
func FuzzFormat(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Fuzz(func(t *testing.T, text string) {
		recs, err := tracetext.Parse(text)
		if err != nil {
			return
		}
		once := tracetext.Format(recs)
		again, err := tracetext.Parse(once)
		if err != nil {
			t.Fatalf("Parse(Format(...)) failed: %v\n%s", err, once)
		}
		if twice := tracetext.Format(again); twice != once {
			t.Fatalf("format is not stable:\n%s\nthen\n%s", once, twice)
		}
	})
}
