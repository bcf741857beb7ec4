package xaalis

import (
	"context"
	"testing"
	"time"
)

// TestProviderBudget: a lookup and the call after it share one budget
// (providerContext inside a bounded context keeps its deadline), a
// client's cancel does not reach a provider call, and a context freed of
// its deadline (context.WithoutCancel) gets a budget of its own again,
// never none.
func TestProviderBudget(t *testing.T) {
	client, hangUp := context.WithCancel(context.Background())
	outer, cancel := providerContext(client)
	defer cancel()
	first, ok := outer.Deadline()
	if !ok || time.Until(first) > ProviderCallBudget {
		t.Fatalf("the budget: %v %v", first, ok)
	}
	time.Sleep(10 * time.Millisecond)
	inner, cancelInner := providerContext(outer)
	defer cancelInner()
	if d, ok := inner.Deadline(); !ok || !d.Equal(first) {
		t.Fatalf("a nested call got its own budget: %v, want %v", d, first)
	}
	hangUp()
	if inner.Err() != nil {
		t.Fatal("the client's cancel reached the provider call")
	}
	freed, cancelFreed := providerContext(context.WithoutCancel(outer))
	defer cancelFreed()
	if d, ok := freed.Deadline(); !ok || !d.After(first) {
		t.Fatalf("a context freed of its deadline: %v %v", d, ok)
	}
}
