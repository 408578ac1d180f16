#!/bin/sh
# The folders' layers (docs/design.md "The map"): each folder includes only the
# folders listed for it. Prints every include that breaks the table; fails if any.
cd "$1" || exit 2
bad=0
for rule in config:registry registry: store: gate: actors:config,registry,store,gate \
            cluster:actors,config,registry,store,gate; do
  dir=${rule%%:*}
  allowed=${rule#*:}
  for used in $(grep -rhoE '#include "(config|registry|store|gate|actors|cluster|transport)/' "$dir" |
                sed 's/.*"//; s/\///' | sort -u); do
    [ "$used" = "$dir" ] && continue
    case ",$allowed," in
      *",$used,"*) ;;
      *) echo "$dir/ includes $used/ (docs/design.md \"The map\")"; bad=1 ;;
    esac
  done
done
exit $bad
