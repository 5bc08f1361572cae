//go:build !race

package chain_test

// raceEnabled: the race detector is on, which makes every Go stack frame larger.
const raceEnabled = false
