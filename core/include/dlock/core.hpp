// dlock/core.hpp: the core API (interfaces, handles, errors) without any backend.
// Services that take a provider by injection need only this header.
#pragma once

#include <dlock/core/acquire_all.hpp>
#include <dlock/core/distributed_lock.hpp>
#include <dlock/core/distributed_reader_writer_lock.hpp>
#include <dlock/core/distributed_semaphore.hpp>
#include <dlock/core/election.hpp>
#include <dlock/core/errors.hpp>
#include <dlock/core/fence.hpp>
#include <dlock/core/health.hpp>
#include <dlock/core/inspection.hpp>
#include <dlock/core/lock_handle.hpp>
#include <dlock/core/metrics_sink.hpp>
#include <dlock/core/prometheus_metrics.hpp>
#include <dlock/core/provider.hpp>
#include <dlock/core/upgradeable_lock_handle.hpp>
