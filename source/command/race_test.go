//go:build race

package command

// raceEnabled: under the race detector, sync.Pool drops objects on
// purpose (regexp machines are then allocated per match), so allocation
// figures say nothing of the code as shipped.
const raceEnabled = true
