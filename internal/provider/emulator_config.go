package provider

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// DefaultEmulatorBase is where the embedded configuration's routes point:
// the emulator's default address.
const DefaultEmulatorBase = "http://127.0.0.1:9090"

// EmulatorConfigJSON is the embedded configuration made ready for live mode
// against an emulator at base (http://127.0.0.1:9090): every route points
// at it and carries the emulator's published credentials. Live servers
// accept those only on loopback base URLs, so this is the development
// flow: `xaalis provider-emulator --print-config > dev.json`, then
// `xaalis serve --config dev.json`.
func EmulatorConfigJSON(base string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(xaalis.DefaultConfigJSON(), &doc); err != nil {
		return nil, fmt.Errorf("embedded configuration: %w", err)
	}
	base = strings.TrimRight(base, "/")
	providers, _ := doc["providers"].(map[string]any)
	for name, p := range providers {
		spec, _ := p.(map[string]any)
		routes, _ := spec["routes"].([]any)
		for _, r := range routes {
			rt, _ := r.(map[string]any)
			if u, ok := rt["base_url"].(string); ok {
				rt["base_url"] = base + strings.TrimPrefix(u, DefaultEmulatorBase)
			}
			rt["api_key"] = xaalis.EmulatorAPIKey(name)
			rt["notify_secret"] = xaalis.EmulatorNotifySecret(name)
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// EmulatorConfig parses EmulatorConfigJSON.
func EmulatorConfig(base string) (*xaalis.Config, error) {
	b, err := EmulatorConfigJSON(base)
	if err != nil {
		return nil, err
	}
	return xaalis.ParseConfig(b)
}
