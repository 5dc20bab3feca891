package export

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/memtrail/memtrail/internal/analysis"
)

// Collapsed writes the call stacks of process p as collapsed stacks, the
// input of flamegraph.pl and one of speedscope's: one line per path of
// calls, its functions from the outermost (main) to the one that called
// the allocator separated by ';', then a space and what the stacks
// ending there cost. The paths are those of the top-down tree by cost
// (heaptrack's, and the flame graph's of memtrail view): stacks that
// differ only in the lines of their calls are one path. Paths that cost
// nothing are left out.
func Collapsed(w io.Writer, p *analysis.Process, cost analysis.Cost) error {
	bw := bufio.NewWriter(w)
	var path []string
	var walk func(n *analysis.TreeNode)
	walk = func(n *analysis.TreeNode) {
		path = append(path, collapsedName(n.Frame.Name()))
		if n.Self > 0 {
			fmt.Fprintf(bw, "%s %d\n", strings.Join(path, ";"), n.Self)
		}
		for _, c := range n.Children {
			walk(c)
		}
		path = path[:len(path)-1]
	}
	for _, c := range p.TopDown(p.SiteList(), cost).Children {
		walk(c)
	}
	return bw.Flush()
}

// collapsedName makes a function name fit in a collapsed stack, where ';'
// separates frames and a line ends a stack.
var collapsedName = strings.NewReplacer(";", ":", "\r\n", " ", "\n", " ", "\r", " ").Replace
