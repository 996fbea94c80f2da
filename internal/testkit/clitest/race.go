//go:build race

package clitest

// Race is true when the tests run with the race detector: Build then
// builds the binaries under test with it too.
const Race = true
