//go:build race

package faults_test

// raceEnabled builds the binaries under test with the race detector when
// the suite itself runs with it.
const raceEnabled = true
