//go:build race

package rank

const raceEnabled = true
