# Apache Curator from Debian's jars, for the ZooKeeper interoperability tests and benchmark.
#
# Sets DLOCK_JAVA (the java launcher, empty without a JDK), DLOCK_CURATOR_JARS (the jars a
# Curator client needs), and DLOCK_CURATOR_MISSING (the Debian packages to install when Java is
# there but a jar is not). Defines dlock_add_curator_jar(<target> <source.java>), which
# compiles a Java program against those jars, and sets <target>_CLASSPATH in the caller.
# Variables are per directory: included once in each directory that uses them.
include_guard(DIRECTORY)
get_property(dlock_curator_reported GLOBAL PROPERTY DLOCK_CURATOR_REPORTED)
set_property(GLOBAL PROPERTY DLOCK_CURATOR_REPORTED TRUE)

set(DLOCK_JAVA "")
set(DLOCK_CURATOR_JARS "")
set(DLOCK_CURATOR_MISSING "")
find_package(Java 11 COMPONENTS Development)
if(Java_FOUND)
  include(UseJava)
  foreach(jar curator-framework curator-client curator-recipes zookeeper zookeeper-jute guava
              slf4j-api slf4j-nop)
    find_jar(DLOCK_JAR_${jar} ${jar} PATHS /usr/share/java)
    if(DLOCK_JAR_${jar})
      list(APPEND DLOCK_CURATOR_JARS "${DLOCK_JAR_${jar}}")
    else()
      set(DLOCK_CURATOR_MISSING
          "libcurator-framework-java libcurator-recipes-java libzookeeper-java libslf4j-java")
    endif()
  endforeach()
  if(DLOCK_CURATOR_MISSING AND NOT dlock_curator_reported)
    message(WARNING "dlock: Curator's jars not found (apt-get install ${DLOCK_CURATOR_MISSING}); "
                    "the Curator interoperability tests will fail")
  elseif(NOT DLOCK_CURATOR_MISSING)
    set(DLOCK_JAVA "${Java_JAVA_EXECUTABLE}")
  endif()
elseif(NOT dlock_curator_reported)
  message(STATUS "dlock: no JDK (apt-get install default-jdk-headless): Curator interoperability "
                 "tests are skipped, the benchmark shows no Curator figures")
endif()

function(dlock_add_curator_jar target source)
  set(${target}_CLASSPATH "" PARENT_SCOPE)
  if(NOT DLOCK_JAVA)
    return()
  endif()
  add_jar(${target} SOURCES ${source} INCLUDE_JARS ${DLOCK_CURATOR_JARS})
  get_target_property(jar_file ${target} JAR_FILE)
  string(JOIN ":" classpath "${jar_file}" ${DLOCK_CURATOR_JARS})
  set(${target}_CLASSPATH "${classpath}" PARENT_SCOPE)
endfunction()
