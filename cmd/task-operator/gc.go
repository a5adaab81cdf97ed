package main

import "runtime/debug"

// defaultGCPercent is the operator's GOGC when its environment sets none. Most of the heap is
// the informer cache, which lives as long as the process, while the garbage comes in bursts
// (every watch event and every status patch's answer is decoded and dropped); Go's default
// of 100 lets that garbage grow to the size of the whole cache before a collection, so the
// peak RSS is about twice what the cache needs. At 50 the peak is about one and a half times
// it, for a collection twice as often: the bench's memory scenario reports both the peak RSS
// and the operator's CPU (docs/benchmarks.md). GOMEMLIMIT, which the Deployment sets from the
// container's memory limit, still lets the collector work harder near that limit.
const defaultGCPercent = 50

// applyDefaultGCPercent sets defaultGCPercent unless GOGC is set: GOGC=off or any number is the
// user's, which the runtime has already read.
func applyDefaultGCPercent(lookupEnv func(string) (string, bool)) {
	if _, set := lookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}
