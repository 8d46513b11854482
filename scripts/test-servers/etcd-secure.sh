# shellcheck shell=bash
# Group etcd-secure: etcd over TLS with the test CA's certificate (etcd-tls), the same requiring
# client certificates (etcd-mtls), and etcd with authentication on (etcd-auth). Launched and
# checked with etcd.sh's helpers.

register_group etcd-secure etcd-secure etcd-tls etcd-mtls etcd-auth

etcdctl_on_auth_member() {
  # shellcheck disable=SC2046 # one flag per word
  etcdctl $(etcdctl_flags etcd-auth) --command-timeout=5s "$@" >>"$(server_log etcd-auth)" 2>&1
}

# etcd-auth: root (password root), user dlock (password dlock) with read and write on the keys
# under auth-test/, user stranger (password stranger) with no permission there; then auth on.
etcd-secure::after_ready() {
  local step
  for step in "user add root:root" "user grant-role root root" "role add dlock-locks" \
    "role grant-permission dlock-locks --prefix=true readwrite auth-test/" \
    "user add dlock:dlock" "user grant-role dlock dlock-locks" "user add stranger:stranger" \
    "auth enable"; do
    # shellcheck disable=SC2086 # the step's words are etcdctl's arguments
    if ! etcdctl_on_auth_member $step; then
      say "etcd-auth: setting up users and roles failed at 'etcdctl $step'"
      show_log_tail etcd-auth
      return 1
    fi
  done
  touch "$(server_dir etcd-auth)/auth_enabled"
}

etcd-secure::prerequisites() { etcd_prerequisites; }
etcd-secure::extra_ports() { echo peer_port; }
etcd-secure::uses_test_ca() { :; }
etcd-secure::launch() { launch_etcd "$1"; }
etcd-secure::answers() { etcd_answers "$1"; }
etcd-secure::is_process() { etcd_is_process "$@"; }

# Without options or credentials: the tests add them (the CA is DLOCK_TEST_TLS_DIR's).
etcd-secure::env() {
  echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
  echo "export DLOCK_TEST_ETCD_TLS=etcd://127.0.0.1:$(server_port etcd-tls)"
  echo "export DLOCK_TEST_ETCD_MTLS=etcd://127.0.0.1:$(server_port etcd-mtls)"
  echo "export DLOCK_TEST_ETCD_AUTH=etcd://127.0.0.1:$(server_port etcd-auth)"
}
