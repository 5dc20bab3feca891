package record

// SetSweepBudget makes the leak scan's sweep keep at most n pointers,
// until the function it returns is called.
func SetSweepBudget(n int) (restore func()) {
	old := sweepBudget
	sweepBudget = func(int) int { return n }
	return func() { sweepBudget = old }
}
