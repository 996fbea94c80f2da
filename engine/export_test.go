package engine

// SweepNow runs one sweep of e now (the sweeper's step), for the tests of
// package engine_test.
var SweepNow = (*Engine).sweep
