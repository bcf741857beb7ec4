package webhook

import (
	"crypto/rand"
	"math/big"
	mrand "math/rand/v2"
	"time"
)

// Schedule is the wait before each retry (DECISIONS.md: Webhooks): after
// the first attempt fails, 1 min; after the second, 5 min; ... The last
// retry is the ninth attempt, about three days after the first; when it
// fails the delivery is failed (and stays replayable).
var Schedule = []time.Duration{
	time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
	10 * time.Hour, 24 * time.Hour, 24 * time.Hour,
}

// Jitter is the spread of a wait: ±10 %.
const Jitter = 0.10

// NextAttempt returns when to try again after attempts failed attempts
// (1: the first failed): now + Schedule[attempts-1] × (1 ± 10 %), with
// jitter() in [0, 1) choosing where in the band (nil: random). It returns
// false when the schedule is exhausted: the delivery has failed.
func NextAttempt(attempts int, now time.Time, jitter func() float64) (time.Time, bool) {
	if attempts < 1 {
		attempts = 1
	}
	if attempts > len(Schedule) {
		return time.Time{}, false
	}
	var j float64
	if jitter != nil {
		j = jitter()
	} else {
		j = mrand.Float64()
	}
	if !(j >= 0) { // NaN too
		j = 0
	}
	if j > 1 {
		j = 1
	}
	base := Schedule[attempts-1]
	f := 1 + Jitter*(2*j-1)
	return now.Add(time.Duration(float64(base) * f)), true
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewSecret makes a signing secret: whsec_ and 32 random base62
// characters (190 bits).
func NewSecret() string {
	b := make([]byte, 32)
	max := big.NewInt(int64(len(base62)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("webhook: no randomness: " + err.Error())
		}
		b[i] = base62[n.Int64()]
	}
	return "whsec_" + string(b)
}
