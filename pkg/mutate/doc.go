// Package mutate holds the pure decisions of olmguard's mutating webhooks: given what the
// apiserver sent and what olmguard looked up, which JSON patch operations to return. Patches only
// append or fill in; they never remove or change a value OLM set (see DESIGN.md, safety rules).
package mutate
