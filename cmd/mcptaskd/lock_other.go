//go:build !unix

package main

// lockDB does nothing on systems without flock: do not run two servers on
// one task database.
func lockDB(string) (func(), error) { return func() {}, nil }

// dbLockHeld says whether lockDB holds a lock: no.
const dbLockHeld = false
