package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"

	"github.com/google/pprof/profile"
)

// AllocProfile records where a measured phase allocated, as a pprof
// profile: the runtime's allocation profile, which counts from the
// process's start, taken at Stop less the one taken at Start. Its sample
// types are those of the runtime's (alloc_space and alloc_objects among
// them). The runtime publishes the profile at each garbage collection:
// Stop, called once the phase is over, runs one so that the phase's end
// is exact; Start does not, not to stall the phase, so its start is the
// collection before it (a fraction of a second under load).
type AllocProfile struct {
	start *profile.Profile
	err   error
}

func readAllocs() (*profile.Profile, error) {
	var b bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&b, 0); err != nil {
		return nil, fmt.Errorf("allocation profile: %w", err)
	}
	p, err := profile.Parse(&b)
	if err != nil {
		return nil, fmt.Errorf("allocation profile: %w", err)
	}
	return p, nil
}

// Start begins a measurement.
func (a *AllocProfile) Start() { a.start, a.err = readAllocs() }

// Stop writes what was allocated since Start to w, in the format `go tool
// pprof` reads. It runs a garbage collection: call it after the phase.
func (a *AllocProfile) Stop(w io.Writer) error {
	if a.err != nil {
		return a.err
	}
	if a.start == nil {
		return errors.New("bench: allocation profile never started")
	}
	runtime.GC()
	end, err := readAllocs()
	if err != nil {
		return err
	}
	a.start.Scale(-1)
	d, err := profile.Merge([]*profile.Profile{end, a.start})
	if err != nil {
		return fmt.Errorf("allocation profile: %w", err)
	}
	// The stacks that allocated nothing during the phase sum to zero.
	kept := d.Sample[:0]
	for _, s := range d.Sample {
		for _, v := range s.Value {
			if v != 0 {
				kept = append(kept, s)
				break
			}
		}
	}
	d.Sample = kept
	return d.Write(w)
}
