package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// defaultServiceName is the service.name of mcptaskd's spans when
// OTEL_SERVICE_NAME does not set one.
const defaultServiceName = "mcptaskd"

// tracingWanted reports whether the environment asks for trace export:
// OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) unless
// OTEL_TRACES_EXPORTER=none. Any other exporter is an error: mcptaskd
// exports OTLP over HTTP only.
func tracingWanted(getenv func(string) string) (bool, error) {
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: mcptaskd exports traces with otlp (OTLP over HTTP) or none", exp)
	}
}

// newTracerProvider returns the provider of mcptaskd's spans, exporting
// them with OTLP over HTTP as the standard OTEL_* variables say (endpoint,
// headers, timeout, compression, batch span processor, sampler, resource
// attributes), and the function that flushes and stops it. It returns a
// nil provider (mcptask then records nothing) when the environment asks
// for no export.
func newTracerProvider(ctx context.Context, getenv func(string) string, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	want, err := tracingWanted(getenv)
	if err != nil || !want {
		return nil, func(context.Context) error { return nil }, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// The service name: OTEL_SERVICE_NAME (or service.name in
	// OTEL_RESOURCE_ATTRIBUTES), else mcptaskd.
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nil, fmt.Errorf("OTel resource: %w", err)
	}
	if v, ok := res.Set().Value("service.name"); !ok || v.AsString() == "" || strings.HasPrefix(v.AsString(), "unknown_service") {
		res, err = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", defaultServiceName)))
		if err != nil {
			return nil, nil, fmt.Errorf("OTel resource: %w", err)
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	name, _ := res.Set().Value("service.name")
	log.Info("exporting traces with OTLP over HTTP", "service", name.AsString())
	return tp, tp.Shutdown, nil
}
