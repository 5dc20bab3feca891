package record_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/fixture"
	"github.com/memtrail/memtrail/internal/record"
)

// TestStaticInterpreter runs a script whose interpreter is statically
// linked, directly or through another script: as for a static program,
// memtrail refuses it, naming the interpreter, rather than run it and
// find that nothing was recorded.
func TestStaticInterpreter(t *testing.T) {
	static := fixture.Build(t, src("apis.c"), "-static", "-O0")
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!"+static+" -x\n"), 0o755)
	script2 := filepath.Join(dir, "script2")
	os.WriteFile(script2, []byte("#! "+script+"\n"), 0o755)
	for _, prog := range []string{script, script2} {
		_, err := record.Run(record.Options{Args: []string{prog}, Output: filepath.Join(t.TempDir(), "t.mtr"), AgentPath: fixture.Agent(t)})
		want := prog + ": its interpreter " + static + " is statically linked"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want one starting %q", prog, err, want)
		}
	}
}
