// Package admit holds what every admission handler of olmguard shares: the table type that ties
// a path to its webhook configuration entry and its handler, the one typed adapter (Typed: the
// kind and operation check against the entry's rules, the strict decode, the namespace fallback
// and the error answers, so that a handler keeps only its decision), the one fail-open policy
// (Serve and LookupFailed), and the live lookups handlers make (Subscriptions, CatalogSource
// namespaces). The webhook configurations themselves are built by pkg/admit/registration.
//
// The fail-open policy, written once: olmguard never makes OLM worse, so a request it cannot
// judge is admitted unchanged. A failed lookup (LookupFailed) is logged, counted in
// olmguard_webhook_lookup_errors_total{webhook} and returned to the writer as a warning saying
// what is left undone; a handler that errs or panics (Serve) is logged, counted as
// olmguard_webhook_requests_total{result="error"} and warned the same way. Only a deliberate
// denial (403) reaches the apiserver as a denial.
package admit
