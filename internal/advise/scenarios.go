package advise

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"
)

// The built-in scenarios are ordinary workload files, so each one is also an
// example of the format.
//
//go:embed scenarios/*.yaml
var scenarioFS embed.FS

// Scenario is a built-in workload.
type Scenario struct {
	Name        string
	Description string
}

// Scenarios lists the built-in workloads by name.
func Scenarios() ([]Scenario, error) {
	entries, err := scenarioFS.ReadDir("scenarios")
	if err != nil {
		return nil, err
	}
	var out []Scenario
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".yaml")
		w, err := LoadScenario(name)
		if err != nil {
			return nil, err
		}
		out = append(out, Scenario{Name: name, Description: w.Description})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// LoadScenario decodes a built-in workload.
func LoadScenario(name string) (*Workload, error) {
	file := path.Join("scenarios", name+".yaml")
	data, err := scenarioFS.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("unknown scenario %q (see --list)", name)
	}
	return ParseWorkload(data, file, nil)
}
