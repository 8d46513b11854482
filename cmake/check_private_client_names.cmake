# cmake -DLIBRARY=... -DNAMES=... -DNM=... -P check_private_client_names.cmake
#
# Fails when LIBRARY (libdlock-zookeeper) calls the ZooKeeper C client under a name of the
# original library (listed in NAMES) rather than its private copy's: a program linking
# Debian's threaded client beside dlock would have that call served by the wrong client.
cmake_minimum_required(VERSION 3.16)
execute_process(COMMAND "${NM}" -u "${LIBRARY}" OUTPUT_VARIABLE undefined RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cannot list the undefined symbols of ${LIBRARY} with ${NM}")
endif()
file(STRINGS "${NAMES}" names)
string(REGEX MATCHALL "U [A-Za-z_][A-Za-z0-9_]*" references "${undefined}")
set(wrong)
foreach(reference IN LISTS references)
  string(SUBSTRING "${reference}" 2 -1 name)
  if(name IN_LIST names)
    list(APPEND wrong "${name}")
  endif()
endforeach()
if(wrong)
  list(REMOVE_DUPLICATES wrong)
  message(FATAL_ERROR "${LIBRARY} refers to the ZooKeeper C client's own names (${wrong}): add "
                      "their prefix to the names cmake/ZooKeeperPrivateClient.cmake maps")
endif()
