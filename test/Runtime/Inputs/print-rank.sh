#!/bin/sh
echo "rank $RANK here"
