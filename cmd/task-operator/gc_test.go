package main

import (
	"runtime/debug"
	"testing"
)

func TestGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
	}{
		{"GOGC unset", map[string]string{}, defaultGCPercent},
		{"GOGC set to a number", map[string]string{"GOGC": "200"}, 77},
		{"GOGC set to off", map[string]string{"GOGC": "off"}, 77},
		{"GOGC set empty", map[string]string{"GOGC": ""}, 77},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 77 stands for whatever the runtime took from GOGC: left as it is when GOGC is set.
			restore := debug.SetGCPercent(77)
			defer debug.SetGCPercent(restore)
			applyDefaultGCPercent(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if got := debug.SetGCPercent(77); got != tc.want {
				t.Errorf("GC percent = %d, want %d", got, tc.want)
			}
		})
	}
}
