// Package engine runs task work. It creates tasks durably in a
// [store.Store], runs each task's work detached from the request that started
// it, delivers cancellation and client input to the running work, resolves
// tasks left behind by a dead process according to their recovery policy, and
// sweeps expired tasks.
//
// The engine knows nothing of MCP wires: the wire adapters translate
// protocol requests into calls of [Engine.Start], [Engine.Get],
// [Engine.Cancel] and [Engine.Respond], and task work reaches the engine
// through the [Handle] found in its context.
//
// Its background services each run on a goroutine of their own, with an
// interval and a timeout for each store call of their own (see [Options]
// and the Default constants): the renewal of the leases of running work,
// the takeover of tasks whose lease expired, the sweeper of expired tasks,
// and the follower of the store's change feed. A store call that hangs in
// one of them delays no other, and [Engine.Shutdown] waits for them all.
package engine
