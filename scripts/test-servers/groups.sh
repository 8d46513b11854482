# shellcheck shell=bash disable=SC2154 # state_dir, partition_set, netns, ...: set by test-servers.sh
# What every group goes through, whatever its kind (sourced by test-servers.sh, not run): a fresh
# start with retries on other ports, removal, and its lines in the endpoints file. Each step that
# differs between kinds is a hook of the group's module (see common.sh).

group_env_file() { echo "$state_dir/$1.env"; }
group_owner_file() { echo "$state_dir/$1.owner"; }

# "ADDRESS:PORT,...": the servers IDS over PATH (path_hosts PATH IDS...).
path_hosts() {
  local path=$1 id list=()
  shift
  for id in "$@"; do list+=("$(path_address "$id" "$path"):$(server_port "$id")"); done
  local IFS=,
  echo "${list[*]}"
}

# The partition set's lines are per path, URLs over that path's addresses.
write_group_env() {
  local group=$1 path
  if $partition_set; then
    if group_has_hook "$group" partition_env; then
      for path in "${partition_paths[@]}"; do
        group_hook "$group" partition_env "$group" "$path" "${path^^}"
      done
    fi
  else
    group_hook "$group" env "$group"
  fi >"$(group_env_file "$group").tmp"
  mv "$(group_env_file "$group").tmp" "$(group_env_file "$group")"
}

endpoints_file() { echo "$state_dir/endpoints.env"; }

# endpoints.env holds the lines of every group that runs, so that groups started by separate
# commands (one CTest fixture per backend) share one file.
write_endpoints_file() {
  local group files=()
  for group in "${all_groups[@]}"; do
    [[ -f "$(group_env_file "$group")" ]] && files+=("$(group_env_file "$group")")
  done
  if ((${#files[@]} == 0)); then
    rm -f "$(endpoints_file)"
    return
  fi
  {
    echo "# dlock test servers in $state_dir (scripts/test-servers.sh); source this file."
    if $partition_set; then
      echo "export DLOCK_PARTITION_NETNS=$netns"
    fi
    cat "${files[@]}"
  } >"$(endpoints_file).tmp"
  mv "$(endpoints_file).tmp" "$(endpoints_file)"
}

group_healthy() {
  local id
  [[ -f "$(group_env_file "$1")" ]] || return 1
  for id in $(group_members "$1"); do
    server_healthy "$id" || return 1
  done
}

group_recorded() {
  local id
  for id in $(group_members "$1"); do
    [[ -d "$(server_dir "$id")" ]] && return 0
  done
  [[ -f "$(group_env_file "$1")" ]]
}

remove_group() {
  local group=$1 id
  # shellcheck disable=SC2046 # the member list is meant to split
  stop_servers $(group_members "$group") || die "$group: could not stop every server"
  if group_has_hook "$group" remove; then
    group_hook "$group" remove "$group"
  fi
  for id in $(group_members "$group"); do
    rm -rf "$(server_dir "$id")"
  done
  rm -f "$(group_env_file "$group")" "$(group_owner_file "$group")"
}

# Starts every server of `group` from scratch on the ports assign_ports picked; when a port was
# taken between the pick and the bind, starts them again on new ports.
start_group_fresh() {
  local group=$1 attempt status id ids
  read -r -a ids <<<"$(group_members "$group")"
  if group_has_hook "$group" prepare; then
    group_hook "$group" prepare "$group" || return 1
  fi
  for ((attempt = 1; attempt <= port_attempts; attempt++)); do
    if ((attempt > 1)); then
      assign_ports "$group"
    fi
    if group_has_hook "$group" configure; then
      group_hook "$group" configure "$group"
    fi
    for id in "${ids[@]}"; do
      launch_server "$id"
    done
    status=0
    if group_has_hook "$group" before_wait; then
      group_hook "$group" before_wait "$group" || status=1
    fi
    if ((status == 0)); then
      wait_until_all_answer "${ids[@]}" || status=$?
    fi
    if ((status == 0)) && group_has_hook "$group" after_ready; then
      group_hook "$group" after_ready "$group" || status=1
    fi
    if ((status == 0)); then
      return 0
    fi
    stop_servers "${ids[@]}" || return 1
    ((status == 2)) || return 1
    say "$group: trying other ports"
  done
  say "$group: gave up after $port_attempts attempts to find free ports"
  return 1
}

# Runs as a background job per group.
start_group() {
  local group=$1 owner=$2 started
  started=$(milliseconds_now)
  if ! start_group_fresh "$group"; then
    say "$group: failed to start; see above"
    remove_group "$group"
    return 1
  fi
  echo "$owner" >"$(group_owner_file "$group")"
  write_group_env "$group"
  say "$group: up in $(seconds_since "$started")s"
}
